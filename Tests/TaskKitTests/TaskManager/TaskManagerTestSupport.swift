import Dispatch
import Testing
import TaskKitTestSupport
@testable import TaskKit

/// A thread-safe list of events.
final class TaskManagerTestLog<Element: Sendable>: Sendable {
    private let items = LockedState<[Element]>([])
    init() {}
    func append(_ element: Element) { items.withLock { $0.append(element) } }
    var all: [Element] { items.withLock { $0 } }
    var count: Int { items.withLock { $0.count } }
}

/// Collects completions and lets a test await a given number of them, with a deadline.
final class TaskManagerTestCompletions<Value: Sendable>: Sendable {
    private struct State {
        var results: [(tag: Int, result: Result<Value, any Error>)] = []
    }

    private let state = LockedState(State())
    /// One arrival per completion, counted after the completion is in `state`.
    private let arrivals = TestGate()
    init() {}

    func callback(_ tag: Int = 0) -> @Sendable (Result<Value, any Error>) -> Void {
        { result in self.record(tag, result) }
    }

    func record(_ tag: Int, _ result: Result<Value, any Error>) {
        state.withLock { $0.results.append((tag, result)) }
        arrivals.arrive()
    }

    /// Suspends until at least `count` completions arrived; records an issue and returns after
    /// `limit`.
    func waitFor(
        _ count: Int, within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await arrivals.waitForArrivals(count, within: limit, sourceLocation: sourceLocation)
    }

    var results: [(tag: Int, result: Result<Value, any Error>)] { state.withLock { $0.results } }
    var count: Int { state.withLock { $0.results.count } }
    func result(_ tag: Int) -> Result<Value, any Error>? { results.first { $0.tag == tag }?.result }
    func all(_ tag: Int) -> [Result<Value, any Error>] { results.filter { $0.tag == tag }.map(\.result) }
}

/// A task running an async closure, recording `didCancel` calls and executions.
final class TaskManagerTestTask<Value: Sendable>: ManagedTask {
    typealias SuccessValue = Value
    let name: String
    let body: @Sendable (TaskManagerTestTask<Value>) async throws -> Value
    let cancellations = TaskManagerTestLog<String>()
    let executions = TaskManagerTestLog<Int>()
    let timeout: Duration?
    let headers = LockedState<[String]>([])

    init(_ name: String = "", timeout: Duration? = nil, body: @escaping @Sendable (TaskManagerTestTask<Value>) async throws -> Value) {
        self.name = name
        self.timeout = timeout
        self.body = body
    }

    func execute() async throws -> Value {
        executions.append(executions.count + 1)
        return try await body(self)
    }

    func didCancel(with error: TaskError) {
        cancellations.append(tmDescribe(error))
    }
}

/// A task written in the callback style.
final class TaskManagerTestCallbackTask: CallbackManagedTask {
    typealias SuccessValue = Int
    let value: Int
    init(_ value: Int) { self.value = value }
    func execute(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        DispatchQueue.global().async {
            completion(.success(self.value))
            completion(.success(-1))  // ignored
        }
    }
}

struct TaskManagerTestError: Error, Equatable { var code = 0 }

func tmDescribe(_ error: TaskError) -> String {
    switch error {
    case .cancelled: return "cancelled"
    case .timedOut: return "timedOut"
    case .discarded: return "discarded"
    case .reactorFailed(let type, let error): return "reactorFailed(\(type), \(error))"
    case .reactorTimedOut(let type): return "reactorTimedOut(\(type))"
    case .shuttingDown: return "shuttingDown"
    }
}

func tmDescribe<V>(_ result: Result<V, any Error>?) -> String {
    switch result {
    case nil: return "nil"
    case .success(let value)?: return "success(\(value))"
    case .failure(let error as TaskError)?: return tmDescribe(error)
    case .failure(let error)?: return "failure(\(error))"
    }
}

extension TaskManager {
    /// Reads the manager's state machine.
    func inspect<R>(_ body: (TaskManagerStorage.Machine) -> R) -> R { storage.inspect(body) }
}

/// An interceptor answering from a closure, recording every call.
struct TaskManagerTestInterceptor: Interceptor {
    let calls = TaskManagerTestLog<(name: String, batchCount: Int)>()
    let script: @Sendable (String, Int) -> InterceptCommand
    let adapter: (@Sendable (String) async throws -> Void)?

    init(
        adapter: (@Sendable (String) async throws -> Void)? = nil,
        script: @escaping @Sendable (String, Int) -> InterceptCommand
    ) {
        self.script = script
        self.adapter = adapter
    }

    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
        let name = (task as? any TaskManagerTestNamed)?.name ?? "?"
        calls.append((name, currentBatchCount))
        return script(name, currentBatchCount)
    }

    func adapt<T: ManagedTask>(task: T) async throws {
        guard let adapter else { return }
        try await adapter((task as? any TaskManagerTestNamed)?.name ?? "?")
    }
}

protocol TaskManagerTestNamed { var name: String { get } }
extension TaskManagerTestTask: TaskManagerTestNamed {}

/// A reactor whose decision and work are closures.
struct TaskManagerTestReactor: Reactor {
    let configuration: ReactorConfiguration
    let asked = TaskManagerTestLog<(task: String, handle: Int)>()
    let runs = TaskManagerTestLog<Int>()
    let decide: @Sendable (Result<Int, any Error>, String) -> Bool
    let work: @Sendable (Int) async throws -> Void

    init(
        _ configuration: ReactorConfiguration = .default,
        decide: @escaping @Sendable (Result<Int, any Error>, String) -> Bool,
        work: @escaping @Sendable (Int) async throws -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.decide = decide
        self.work = work
    }

    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool {
        let name = (task as? any TaskManagerTestNamed)?.name ?? "?"
        asked.append((name, handle.identifier))
        guard let result = result as? Result<Int, any Error> else { return false }
        return decide(result, name)
    }

    func execute() async throws {
        let run = runs.count + 1
        runs.append(run)
        try await work(run)
    }
}
