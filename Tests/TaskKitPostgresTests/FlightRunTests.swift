#if PostgreSQL
import NIOConcurrencyHelpers
import Testing
@testable import TaskKitPostgres
import TaskKitTestSupport

/// `FlightRun` without a database: its "statements" are closures that answer, fail or never
/// answer, and its outcome reaches the completion exactly once.
struct FlightRunTests {
    /// The outcomes a run delivered, in order.
    final class Outcomes: Sendable {
        private let results = NIOLockedValueBox<[Result<Int, any Error>]>([])

        var count: Int { results.withLockedValue { $0.count } }
        var first: Result<Int, any Error>? { results.withLockedValue { $0.first } }

        func record(_ result: Result<Int, any Error>) { results.withLockedValue { $0.append(result) } }
    }

    /// Whether the body went on past its statement.
    final class Flag: Sendable {
        private let value = NIOLockedValueBox(false)
        var isSet: Bool { value.withLockedValue { $0 } }
        func set() { value.withLockedValue { $0 = true } }
    }

    /// A flight whose one statement (named "read", bounded by `timeout`) first calls `during`
    /// with the run, then waits for `gate`, ignoring its task's cancel (as postgres-nio's query
    /// does), and which records whether it went on past the statement.
    private struct StuckFlight {
        let outcomes = Outcomes()
        let wentOn = Flag()
        let stopped = TestGate()
        let gate = TestGate()

        init(timeout: Duration, timers: StatementTimers, during: @escaping @Sendable (FlightRun<Int>) -> Void = { _ in }) {
            let (outcomes, wentOn, stopped, gate) = (outcomes, wentOn, stopped, gate)
            FlightRun<Int>.launch(completion: outcomes.record) { run in
                defer { _ = stopped.arrive() }
                let value = try await run.statement("read", timeout: timeout, timers: timers) {
                    during(run)
                    await gate.wait(within: .seconds(3_600))
                    return 1
                }
                wentOn.set()
                return value
            }
        }

        /// Lets the statement answer, and checks that the flight stopped there, its callers
        /// answered once.
        func answerLate() async {
            gate.open()
            await eventually("the task ended") { stopped.arrivals == 1 }
            #expect(!wentOn.isSet)
            #expect(outcomes.count == 1)
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aStatementThatNeverAnswersEndsTheRunWithATimeoutAndTheFlightGoesNoFurther() async throws {
        let flight = StuckFlight(timeout: .milliseconds(50), timers: StatementTimers())
        defer { flight.gate.open() }
        await eventually("the run ended") { flight.outcomes.count == 1 }
        guard case .failure(let error)? = flight.outcomes.first,
              case PostgresSingleFlightError.databaseTimeout(let statement, let after)? = error as? PostgresSingleFlightError
        else {
            Issue.record("expected a timeout, got \(String(describing: flight.outcomes.first))")
            return
        }
        #expect(statement == "read" && after == .milliseconds(50))
        await flight.answerLate()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func anAnswerGivenDuringAStatementEndsTheRunAndTheFlightGoesNoFurther() async throws {
        let timers = StatementTimers()
        // The reply's thread answers while the statement's task has not resumed yet.
        let flight = StuckFlight(timeout: .seconds(3_600), timers: timers) { run in run.answer(42) }
        defer { flight.gate.open() }
        await eventually("the answer was given") { flight.outcomes.count == 1 }
        guard case .success(42)? = flight.outcomes.first else {
            Issue.record("expected the answer, got \(String(describing: flight.outcomes.first))")
            return
        }
        await flight.answerLate()
        // The ended statement leaves the timers' queue with the next addition.
        _ = try? await withStatementDeadline(.seconds(3_600), statement: "next", timers: timers) { 0 }
        #expect(timers.count <= 1)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func theBodysResultAndAStatementsFailureReachTheCompletion() async throws {
        struct Failure: Error {}
        let outcomes = Outcomes()
        FlightRun<Int>.launch(completion: outcomes.record) { run in
            try await run.statement("read", timeout: .seconds(3_600)) { 7 }
        }
        await eventually("the run ended") { outcomes.count == 1 }
        guard case .success(7)? = outcomes.first else {
            Issue.record("expected 7, got \(String(describing: outcomes.first))")
            return
        }
        let failures = Outcomes()
        FlightRun<Int>.launch(completion: failures.record) { run in
            try await run.statement("claim", timeout: .seconds(3_600)) { () async throws -> Int in throw Failure() }
        }
        await eventually("the run ended") { failures.count == 1 }
        guard case .failure(let error)? = failures.first,
              case PostgresSingleFlightError.databaseFailure(let statement, let underlying)? = error as? PostgresSingleFlightError
        else {
            Issue.record("expected a database failure, got \(String(describing: failures.first))")
            return
        }
        #expect(statement == "claim" && underlying is Failure)
    }
}
#endif
