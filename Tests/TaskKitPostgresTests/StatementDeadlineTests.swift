#if PostgreSQL
import Testing
@testable import TaskKitPostgres
import TaskKitTestSupport

/// `withStatementDeadline` and the process-wide timers behind it, without a database: the
/// "statements" are closures that answer, fail or never answer.
struct StatementDeadlineTests {
    /// Awaits `gate`, ignoring cancellation: a statement that does not react to its cancel, as
    /// postgres-nio's wait for a connection to an unreachable server.
    private static func stuck(_ gate: TestGate) async -> Int {
        await gate.wait(within: .seconds(3_600))
        return 0
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aStatementThatNeverAnswersTimesOutWithATypedError() async throws {
        let timers = StatementTimers()
        let gate = TestGate()
        defer { gate.open() }
        let call = Task {
            try await withStatementDeadline(.milliseconds(50), statement: "read", timers: timers) {
                await Self.stuck(gate)
            }
        }
        await #expect {
            try await call.boundedValue(within: TestDeadline.scaled(.seconds(90)))
        } throws: { error in
            guard case PostgresSingleFlightError.databaseTimeout(let statement, let after)? = error as? PostgresSingleFlightError
            else { return false }
            return statement == "read" && after == .milliseconds(50)
        }
    }

    /// A deadline earlier than the one the timers sleep until is kept: the short statement times
    /// out long before the hour of the first one.
    @Test(.scaledTimeLimit(minutes: 1))
    func anEarlierDeadlineAddedLaterIsKept() async throws {
        let timers = StatementTimers()
        let gate = TestGate()
        defer { gate.open() }
        let long = Task {
            try await withStatementDeadline(.seconds(3_600), statement: "long", timers: timers) {
                await Self.stuck(gate)
            }
        }
        await eventually("the long statement waits") { timers.count == 1 }
        let short = Task {
            try await withStatementDeadline(.milliseconds(50), statement: "short", timers: timers) {
                await Self.stuck(gate)
            }
        }
        await #expect(throws: PostgresSingleFlightError.self) {
            try await short.boundedValue(within: TestDeadline.scaled(.seconds(90)))
        }
        long.cancel()
        await #expect(throws: CancellationError.self) { try await long.boundedValue() }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func answersAndFailuresPassThroughAndEndedStatementsLeaveTheQueues() async throws {
        struct Failure: Error {}
        let timers = StatementTimers()
        for index in 0..<1_000 {
            let value = try await withStatementDeadline(.seconds(3_600), statement: "read", timers: timers) { index }
            #expect(value == index)
        }
        await #expect {
            try await withStatementDeadline(.seconds(3_600), statement: "claim", timers: timers) { () async throws -> Int in
                throw Failure()
            }
        } throws: { error in
            guard case PostgresSingleFlightError.databaseFailure(let statement, let underlying)? = error as? PostgresSingleFlightError
            else { return false }
            return statement == "claim" && underlying is Failure
        }
        // Each addition drops the ended statements in front of it: only the last remains.
        #expect(timers.count <= 1)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aCancelledCallerGetsCancellationErrorAtOnce() async throws {
        let timers = StatementTimers()
        let gate = TestGate()
        defer { gate.open() }
        let call = Task {
            try await withStatementDeadline(.seconds(3_600), statement: "read", timers: timers) {
                await Self.stuck(gate)
            }
        }
        await eventually("the statement runs") { timers.count == 1 }
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.boundedValue() }
        // Cancelled before it began: the statement is not run.
        let ran = TestGate()
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withStatementDeadline(.seconds(3_600), statement: "read", timers: timers) {
                _ = ran.arrive()
                return 1
            }
        }
        await #expect(throws: CancellationError.self) { try await early.boundedValue() }
        #expect(ran.arrivals == 0)
    }
}
#endif
