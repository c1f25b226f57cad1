#if PostgreSQL
import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Synchronization
import Testing
@testable import TaskKitPostgres
import TaskKitTestSupport

/// Against a real PostgreSQL server (`scripts/with-postgres`); serialized, since the
/// multi-process tests measure time on a shared machine.
@Suite(.serialized, .enabled(if: PostgresTestServer.enabled, PostgresTestServer.skipMessage))
struct PostgresSingleFlightTests {
    struct Token: Codable, Sendable, Equatable {
        let value: String
    }

    // MARK: - Across processes

    @Test(.scaledTimeLimit(minutes: 1))
    func eightProcessesOfFiftyCallersOnOneKeyLoadOnce() async throws {
        try await runWorkers(keys: 1, callers: 50, pooler: false)
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func eightProcessesOnAThousandKeysLoadEachOnce() async throws {
        try await runWorkers(keys: 1_000, callers: 50, pooler: false)
    }

    @Test(.scaledTimeLimit(minutes: 1), .enabled(if: PostgresTestServer.poolerURL != nil || PostgresTestServer.required,
                                            "no pgbouncer: TASKKIT_POSTGRES_POOLER_URL is not set"))
    func eightProcessesThroughATransactionPoolerLoadOnce() async throws {
        try await runWorkers(keys: 1, callers: 50, pooler: true)
        try await runWorkers(keys: 200, callers: 20, pooler: true)
    }

    /// 8 processes × `callers` callers over `keys` keys: every call gets its key's value, and each
    /// key is loaded exactly once.
    private func runWorkers(keys: Int, callers: Int, pooler: Bool) async throws {
        let url = try #require(pooler ? PostgresTestServer.poolerURL : PostgresTestServer.url)
        let table = PostgresTestServer.uniqueName("sf")
        let executions = PostgresTestServer.uniqueName("ex")
        try await PostgresTestServer.withClient { client in
            try await PostgresSingleFlight(client: client, tableName: table).prepare()
            try await client.query("CREATE TABLE \(unescaped: executions) (key text NOT NULL, pid integer NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp())")
        }
        let workers = try (0..<8).map { _ in
            try WorkerProcess(arguments: [
                "--url", url, "--table", table, "--executions", executions, "--keys", "\(keys)",
                "--callers", "\(callers)", "--load-ms", "200", "--expire-ms", "600000",
            ])
        }
        let exited = await waitForExit(workers, timeout: .seconds(keys > 1 ? 100 : 45))
        let logs = workers.map(\.log).joined(separator: "\n")
        #expect(exited, "workers did not finish in time:\n\(logs)")
        for worker in workers {
            #expect(worker.process.terminationStatus == 0, "worker failed:\n\(worker.log)")
        }
        let counts = try await PostgresTestServer.withClient { client in
            try await PostgresTestServer.executions(client, table: executions)
        }
        #expect(counts.count == keys, "keys loaded: \(counts.count) of \(keys)\n\(logs)")
        let repeated = counts.filter { $0.value != 1 }
        #expect(repeated.isEmpty, "keys loaded more than once: \(repeated.prefix(10))")
    }

    /// The process running `load` is killed with SIGKILL mid-load: another process takes the
    /// claim over when its lease expires and completes it within the lease plus one second,
    /// and every caller of the surviving processes gets a value.
    @Test(.scaledTimeLimit(minutes: 1))
    func aKilledHolderIsTakenOverWithinTheLease() async throws {
        let url = try #require(PostgresTestServer.url)
        let table = PostgresTestServer.uniqueName("sf")
        let executions = PostgresTestServer.uniqueName("ex")
        let lease = Duration.seconds(2)
        try await PostgresTestServer.withClient { client in
            try await PostgresSingleFlight(client: client, tableName: table).prepare()
            try await client.query("CREATE TABLE \(unescaped: executions) (key text NOT NULL, pid integer NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp())")
        }
        // The first load hangs (60 s); a load taken over takes 100 ms.
        let workers = try (0..<4).map { _ in
            try WorkerProcess(arguments: [
                "--url", url, "--table", table, "--executions", executions, "--keys", "1",
                "--callers", "50", "--lease-ms", "2000", "--load-ms", "100", "--first-load-ms", "60000",
                "--expire-ms", "600000",
            ])
        }
        defer { for worker in workers { worker.kill() } }

        // The kill's time on the server's clock, read just before it (the take-over's start is
        // recorded on the same clock).
        let (holder, killedAtOnServer) = try await PostgresTestServer.withClient { client -> (Int32?, Double) in
            let holder = Counter()
            try await eventually("a worker started the load", within: TestDeadline.scaled(.seconds(20)), pollingEvery: .milliseconds(20)) {
                for try await pid in try await client.query("SELECT pid FROM \(unescaped: executions)").decode(Int32.self) {
                    holder.set(Int(pid))
                }
                return holder.value != 0
            }
            var now = 0.0
            for try await time in try await client.query("SELECT extract(epoch FROM clock_timestamp())::float8").decode(Double.self) {
                now = time
            }
            return (holder.value == 0 ? nil : Int32(holder.value), now)
        }
        let holderPID = try #require(holder, "no worker started the load:\n\(workers.map(\.log).joined(separator: "\n"))")
        let victim = try #require(workers.first { $0.pid == holderPID })
        let killedAt = ContinuousClock.now
        victim.kill()

        // The survivors' exit includes their processes' teardown, slow under a sanitizer: that
        // wait is scaled; the take-over's own bound is checked below, on the server's clock.
        let survivors = workers.filter { $0 !== victim }
        let exited = await waitForExit(survivors, timeout: lease + TestDeadline.scaled(.seconds(1)))
        let elapsed = ContinuousClock.now - killedAt
        #expect(exited, "the survivors were not done \(elapsed) after the kill:\n\(survivors.map(\.log).joined(separator: "\n"))")
        for worker in survivors where exited {
            #expect(worker.process.terminationStatus == 0, "worker failed:\n\(worker.log)")
            #expect(worker.log.contains("calls=50 "), "not every caller got a value:\n\(worker.log)")
        }
        let (counts, takeOverStart) = try await PostgresTestServer.withClient { client in
            var start = 0.0
            for try await time in try await client.query(
                "SELECT extract(epoch FROM max(started_at))::float8 FROM \(unescaped: executions)"
            ).decode(Double.self) { start = time }
            return (try await PostgresTestServer.executions(client, table: executions), start)
        }
        #expect(counts == ["k0": 2], "the killed load and exactly one take-over: \(counts)")
        let takeOver = takeOverStart - killedAtOnServer
        #expect(takeOver <= 3.0, "the take-over began \(takeOver) s after the kill (lease 2 s, plus a poll and a claim)")
    }

    // MARK: - Inside one process

    @Test(.scaledTimeLimit(minutes: 1))
    func prepareIsIdempotentAndToleratesConcurrentCreation() async throws {
        try await PostgresTestServer.withClient { client in
            let table = PostgresTestServer.uniqueName("sf")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await PostgresSingleFlight(client: client, tableName: table).prepare() }
                }
                try await group.waitForAll()
            }
            try await PostgresSingleFlight(client: client, tableName: table).prepare()
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func concurrentCallersInOneProcessShareOneLoad() async throws {
        try await withFlight { flight, _ in
            let loads = Counter()
            let release = TestGate()
            let values = try await withThrowingTaskGroup(of: Token.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        try await flight.value(forKey: "shared") {
                            loads.increment()
                            await release.wait()
                            return Token(value: "one")
                        }
                    }
                }
                // The load ends only once the 99 other callers have joined it.
                await eventually("every caller joined the load") { flight.flights.counters.merges == 99 }
                release.open()
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(loads.value == 1)
            #expect(values.allSatisfy { $0 == Token(value: "one") } && values.count == 100)
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aStoredResultIsServedUntilItExpires() async throws {
        try await withFlight { flight, _ in
            let loads = Counter()
            let load: @Sendable () async throws -> Token = {
                Token(value: "v\(loads.increment())")
            }
            #expect(try await flight.value(forKey: "k", resultExpireDuration: .seconds(1), load: load) == Token(value: "v1"))
            #expect(try await flight.value(forKey: "k", resultExpireDuration: .seconds(1), load: load) == Token(value: "v1"))
            // The expiry is the server's clock, which the test does not own: ask until the stored
            // value has expired (each call before that is a hit, which loads nothing).
            try await eventually("the stored result expired", pollingEvery: .milliseconds(50)) {
                try await flight.value(forKey: "k", resultExpireDuration: .seconds(1), load: load) == Token(value: "v2")
            }
            #expect(loads.value == 2)
            // `.zero`: only the callers that waited for the load get its result.
            #expect(try await flight.value(forKey: "z", load: load) == Token(value: "v3"))
            #expect(try await flight.value(forKey: "z", load: load) == Token(value: "v4"))
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aFailureIsNotStoredAndMergedCallersGetTheError() async throws {
        struct Failure: Error {}
        try await withFlight { flight, _ in
            let attempts = Counter()
            let release = TestGate()
            let results = await withTaskGroup(of: Result<Token, any Error>.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        do {
                            return .success(try await flight.value(forKey: "f", resultExpireDuration: .seconds(60)) {
                                attempts.increment()
                                await release.wait()
                                throw Failure()
                            })
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                await eventually("every caller joined the load") { flight.flights.counters.merges == 9 }
                release.open()
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(attempts.value == 1)
            #expect(results.allSatisfy { if case .failure(let error) = $0 { error is Failure } else { false } })
            let value = try await flight.value(forKey: "f", resultExpireDuration: .seconds(60)) { Token(value: "ok") }
            #expect(value == Token(value: "ok"))
            #expect(attempts.value == 1)
        }
    }

    /// A failed load in one process: a caller waiting in another process claims and loads.
    @Test(.scaledTimeLimit(minutes: 1))
    func aWaiterElsewhereLoadsAfterAFailure() async throws {
        struct Failure: Error {}
        try await withFlight { first, client in
            let second = PostgresSingleFlight(client: client, tableName: first.tableName)
            let claimed = TestGate()  // the first process's load runs: it holds the claim
            let release = TestGate()
            let failing = Task {
                try await first.value(forKey: "w", resultExpireDuration: .seconds(60)) { () async throws -> Token in
                    claimed.arrive()
                    await release.wait()
                    throw Failure()
                }
            }
            await claimed.waitForArrivals(1)
            let waiting = Task {
                try await second.value(forKey: "w", resultExpireDuration: .seconds(60)) { Token(value: "second") }
            }
            // Whether the second process is already polling when the first fails, or asks just
            // after, it finds no stored result and no claim, claims and loads: the verdict is the
            // same, so nothing here waits for it.
            release.open()
            await #expect(throws: Failure.self) { try await failing.boundedValue() }
            let loaded = try await waiting.boundedValue()
            #expect(loaded == Token(value: "second"))
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aStoredValueThatNoLongerDecodesIsReloaded() async throws {
        struct Old: Codable, Sendable { let number: Int }
        try await withFlight { flight, _ in
            _ = try await flight.value(forKey: "schema", resultExpireDuration: .seconds(60)) { Old(number: 1) }
            let value = try await flight.value(forKey: "schema", resultExpireDuration: .seconds(60)) { Token(value: "new") }
            #expect(value == Token(value: "new"))
            let again = try await flight.value(forKey: "schema", resultExpireDuration: .seconds(60)) { Token(value: "newer") }
            #expect(again == Token(value: "new"))
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func keysOfAnyLengthAndContent() async throws {
        let keys = ["", "\u{0}", "a\u{0}b", String(repeating: "é", count: 100_000), "🧵 token", "k", "K", "k "]
        try await withFlight { flight, _ in
            for (index, key) in keys.enumerated() {
                let value = try await flight.value(forKey: key, resultExpireDuration: .seconds(60)) { Token(value: "\(index)") }
                #expect(value == Token(value: "\(index)"))
            }
            for (index, key) in keys.enumerated() {
                let value = try await flight.value(forKey: key, resultExpireDuration: .seconds(60)) { Token(value: "reloaded") }
                #expect(value == Token(value: "\(index)"))
            }
        }
    }

    /// A stored value is served whatever its size: a small one decoded on the event loop its
    /// reply arrived on, a larger one in the flight's task.
    @Test(.scaledTimeLimit(minutes: 1))
    func storedValuesOfEverySizeAreServed() async throws {
        let limit = PostgresSingleFlight.largestAnsweredOnEventLoop
        // A token's JSON is its value and 12 bytes: the sizes fall on both sides of the limit.
        let sizes = [0, 100, limit - 12, limit - 11, 1_000_000]
        try await withFlight { flight, _ in
            for size in sizes {
                let stored = Token(value: String(repeating: "x", count: size))
                let loaded = try await flight.value(forKey: "size-\(size)", resultExpireDuration: .seconds(60)) { stored }
                #expect(loaded == stored)
                let loads = Counter()
                let served = try await flight.value(forKey: "size-\(size)", resultExpireDuration: .seconds(60)) {
                    Token(value: "reloaded \(loads.increment())")
                }
                #expect(served == stored, "size \(size)")
                #expect(loads.value == 0, "size \(size)")
            }
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func invalidateDropsTheStoredResult() async throws {
        try await withFlight { flight, _ in
            _ = try await flight.value(forKey: "i", resultExpireDuration: .seconds(60)) { Token(value: "1") }
            try await flight.invalidate("i")
            try await flight.invalidate("never stored")
            let value = try await flight.value(forKey: "i", resultExpireDuration: .seconds(60)) { Token(value: "2") }
            #expect(value == Token(value: "2"))
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aCancelledCallerLeavesAndTheOthersGetTheValue() async throws {
        try await withFlight { flight, _ in
            let release = TestGate()
            let load: @Sendable () async throws -> Token = {
                await release.wait()
                return Token(value: "done")
            }
            let cancelled = Task { try await flight.value(forKey: "c", resultExpireDuration: .seconds(60), load: load) }
            let other = Task { try await flight.value(forKey: "c", resultExpireDuration: .seconds(60), load: load) }
            await eventually("both callers joined the load") { flight.flights.counters.merges == 1 }
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { try await cancelled.boundedValue() }
            release.open()
            let value = try await other.boundedValue()
            #expect(value == Token(value: "done"))
        }
    }

    /// Nothing listens on the port, or a server accepts and never answers: a typed error within
    /// the statement bound, not postgres-nio's minute-long wait.
    @Test(.scaledTimeLimit(minutes: 1), arguments: [false, true])
    func anUnreachableDatabaseFailsWithATypedErrorInTime(silentServer: Bool) async throws {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        if !silentServer { try await listener.close() }
        let client = PostgresClient(
            configuration: .init(host: "127.0.0.1", port: port, username: "nobody", password: nil, database: nil, tls: .disable),
            backgroundLogger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let flight = PostgresSingleFlight(client: client, lease: .seconds(1))
            let start = ContinuousClock.now
            do {
                _ = try await flight.value(forKey: "x") { Token(value: "never") }
                Issue.record("expected an error")
            } catch PostgresSingleFlightError.databaseTimeout(let statement, let after) {
                #expect(statement == "read" && after == .seconds(1))
            }
            #expect(ContinuousClock.now - start < .seconds(3))
            await #expect(throws: PostgresSingleFlightError.self) { try await flight.prepare() }
        }
        if silentServer { try await listener.close() }
    }

    // MARK: - Helpers

    final class Counter: Sendable {
        private let atomic = Atomic<Int>(0)
        var value: Int { atomic.load(ordering: .acquiring) }
        @discardableResult
        func increment() -> Int { atomic.add(1, ordering: .acquiringAndReleasing).newValue }
        func set(_ value: Int) { atomic.store(value, ordering: .releasing) }
    }

    private func withFlight(
        _ body: @Sendable (PostgresSingleFlight, PostgresClient) async throws -> Void
    ) async throws {
        try await PostgresTestServer.withClient { client in
            let flight = PostgresSingleFlight(client: client, tableName: PostgresTestServer.uniqueName("sf"))
            try await flight.prepare()
            try await body(flight, client)
        }
    }
}
#endif
