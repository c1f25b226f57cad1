// URLTaskManager's own work per request, for `valgrind --tool=callgrind` (issue 50): `n` GETs
// one after another through a transport that answers at once with a canned 200, so the count is
// the manager's path (task, handle, pipeline, `HTTPRetryPolicy()`) and nothing of a network
// stack's. See `Benchmarks/http-instruction-counts.sh`, which subtracts a run with n = 0.
//
//   swift build -c release --product HTTPInstructionCounts
//   valgrind --tool=callgrind .build/release/HTTPInstructionCounts manager 10000
//
// Workloads: `transport` (the canned transport called directly: the floor), `manager` (every
// resilience policy off), and, built without `-DBEFORE_RESILIENCE`, `manager-policies`
// (HostConcurrencyLimit(maximumInFlight: 64), a circuit breaker and a retry budget), and each
// of them alone (`manager-limit`, `manager-breaker`, `manager-budget`), and hedging after 1 s
// (`manager-hedging`: what an attempt that needs no hedge pays). The
// `BEFORE_RESILIENCE` flag lets the same file build against a tree from before the policies
// (ebcf3ce), to compare the policies-off path with what it was.
import AsyncHTTPClient
import Dispatch
import Foundation
import TaskKitAsyncHTTPClient
import TaskKitHTTP
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct CannedTransport: HTTPTransport {
    let body = Data("ok".utf8)
    let response = HTTPURLResponse(
        url: URL(string: "http://127.0.0.1:8080/work")!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:]
    )!

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) { (body, response) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let iterations = Int(arguments[2]), iterations >= 0 else {
    print("usage: HTTPInstructionCounts transport|manager|manager-policies|manager-limit|manager-breaker|manager-budget|manager-hedging|ahc|ahc-manager|ahc-manager-limit ITERATIONS")
    exit(2)
}
let overNetwork = arguments[1].hasPrefix("ahc")
let target = overNetwork ? ProcessInfo.processInfo.environment["TASKKIT_BENCH_URL"] : "http://127.0.0.1:8080/work"
guard let target, let url = URL(string: target) else {
    print("the ahc workloads need TASKKIT_BENCH_URL (the URL `HTTPPressure serve` prints)")
    exit(2)
}
let transport: any HTTPTransport = overNetwork ? AsyncHTTPClientTransport(client: .shared) : CannedTransport()
let request = URLRequest(url: url)
let manager: URLTaskManager
switch arguments[1] {
case "transport", "manager", "ahc", "ahc-manager":
    manager = URLTaskManager(interceptors: [HTTPRetryPolicy()], transport: transport)
#if !BEFORE_RESILIENCE
case "manager-policies":
    manager = URLTaskManager(
        interceptors: [HTTPRetryPolicy()], transport: transport,
        hostConcurrency: HostConcurrencyLimit(maximumInFlight: 64), circuitBreaker: CircuitBreakerPolicy(),
        retryBudget: RetryBudget()
    )
// One policy at a time, to see which costs what.
case "manager-limit", "ahc-manager-limit":
    manager = URLTaskManager(
        interceptors: [HTTPRetryPolicy()], transport: transport, hostConcurrency: HostConcurrencyLimit(maximumInFlight: 64)
    )
case "manager-breaker":
    manager = URLTaskManager(interceptors: [HTTPRetryPolicy()], transport: transport, circuitBreaker: CircuitBreakerPolicy())
case "manager-budget":
    manager = URLTaskManager(interceptors: [HTTPRetryPolicy()], transport: transport, retryBudget: RetryBudget())
case "manager-hedging":
    // A hedge after 1 s: never sent here, so this is what hedging costs an attempt that needs none.
    manager = URLTaskManager(interceptors: [HTTPRetryPolicy()], transport: transport, hedging: HedgingPolicy(delay: .seconds(1)))
#endif
default:
    print("unknown workload \(arguments[1])")
    exit(2)
}
let direct = arguments[1] == "transport" || arguments[1] == "ahc"

// Waited for with a semaphore: an `async` top level crashes callgrind (see InstructionCounts).
let finished = DispatchSemaphore(value: 0)
Task.detached {
    var ok = 0
    for _ in 0..<iterations {
        let status = direct
            ? try await transport.send(request).1.statusCode
            : try await manager.data(for: request).1.statusCode
        if status == 200 { ok += 1 }
    }
    precondition(ok == iterations, "HTTPInstructionCounts: only \(ok) of \(iterations) answered 200")
    finished.signal()
}
finished.wait()
