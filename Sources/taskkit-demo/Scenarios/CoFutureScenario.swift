#if Examples
import Foundation
import TaskKit
import TaskKitCombine

extension Scenario {
    /// CoFuture: a chain of requests with map/flatMap, cancellation of the chain, async bridging.
    static let coFuture = Scenario(name: "cofuture", title: "CoFuture — chained requests") { context, record in
        struct Profile: Decodable { let user: String; let name: String }
        struct Search: Decodable { let query: String; let results: [String] }

        // 1. profile -> search for the user's name -> count results, as one chain.
        let chain = CoFuture { try await context.fetch("/profile?user=grace").0 }
            .map { try JSONDecoder().decode(Profile.self, from: $0) }
            .flatMap { profile in CoFuture { try await context.fetch("/search?q=\(profile.user)").0 } }
            .map { try JSONDecoder().decode(Search.self, from: $0) }
        let search = try await chain.value  // bridging to async
        record.measure("chain result", "search for '\(search.query)' returned \(search.results.count) results")
        record.expect("chained query", search.query, equals: "grace")
        record.expect("results", search.results.count, equals: 3)

        // 2. Cancelling the tail of a chain cancels the request in flight at its head.
        let slowStart = ContinuousClock.now
        let slow = CoFuture { try await context.fetch("/slow?ms=2000").0 }
        let tail = slow.map { $0.count }.map { "\($0) bytes" }
        try await Task.sleep(for: .milliseconds(100))
        tail.cancel()
        let headResult = await Task { try? await slow.value }.value
        let cancelledAfter = slowStart.duration(to: .now)
        record.measure("cancelled chain", "head cancelled after \(cancelledAfter.milliseconds) (the request would take 2000 ms)")
        record.expect("tail cancelled", tail.isCancelled, equals: true)
        record.expect("head cancelled through the chain", slow.isCancelled, equals: true)
        record.expect("head produced no value", headResult == nil, equals: true)
        record.expect("cancellation took (s)", cancelledAfter.seconds, atMost: 1.5)

        // The same without CoFuture: a task awaiting another one does not pass its cancellation
        // on, so the head's request runs to its end.
        let naiveStart = ContinuousClock.now
        let head = Task { try await context.fetch("/slow?ms=2000").0 }
        let naiveTail = Task { try await "\(head.value.count) bytes" }
        try await Task.sleep(for: .milliseconds(100))
        naiveTail.cancel()
        let naiveHead = try? await head.value
        let naiveTime = naiveStart.duration(to: .now)
        record.compare(
            "cofuture", workload: "a chain's tail cancelled while its head's request runs", counted: "head requests run to the end",
            naive: Comparison.Run(count: naiveHead == nil ? 0 : 1, seconds: naiveTime.seconds),
            taskKit: Comparison.Run(count: headResult == nil ? 0 : 1, seconds: cancelledAfter.seconds)
        )

        // 3. A promise completed from a callback API, a queue-backed future, and the Combine bridge.
        let promise = CoPromise<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { promise.success(20) }
        let sum = try await promise.flatMap { a in CoFuture(on: .global()) { a + 22 } }.value
        record.expect("promise + queue future", sum, equals: 42)
        let first = try await [1, 2, 3].publisher.subscribeCoFuture().value
        record.expect("first value of a publisher, via subscribeCoFuture()", first, equals: 1)
    }
}
#endif
