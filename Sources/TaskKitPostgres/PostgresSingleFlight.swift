#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import TaskKit

/// Single-flight across processes that share a PostgreSQL database: for a key, at most one
/// `load` runs at a time in the whole fleet, and every caller waiting meanwhile gets its result.
///
/// ```swift
/// let flight = PostgresSingleFlight(client: client)
/// try await flight.prepare()
/// let token = try await flight.value(forKey: "partner-api-token", resultExpireDuration: .seconds(50 * 60)) {
///     try await partnerAPI.fetchToken()
/// }
/// ```
///
/// - Inside a process, concurrent callers of a key are merged first, by TaskKit's single-flight
///   (a `KeyedMonoTask` that caches nothing): the process makes at most one claim per key at a
///   time, with the first caller's `load`, `Value` type and `resultExpireDuration`. A caller
///   whose task is cancelled leaves at once; the flight goes on for the others, and when all
///   have left it still ends (its result is stored for the fleet).
/// - Across processes, a row per key in one table holds a *claim* (a token and a lease) and the
///   last result. The caller that takes the claim runs `load`, renews the lease every third of it
///   (a heartbeat), then stores the result and releases the claim in one statement. Others poll
///   the row until a result stored after they arrived appears, or the claim is released or
///   expires, and then try to claim themselves. A killed holder's claim expires within `lease`
///   and a waiter takes it over.
/// - A stored result is served to any caller until `resultExpireDuration` after it was stored
///   (`nil`: until ``invalidate(_:)``); with `.zero`, only to the callers that waited for its
///   load.
/// - Failures are not stored. The callers merged with the failed load in its process get its
///   error; callers in other processes find the claim released with no new result, and one of
///   them claims and runs its own `load`.
///
/// Every statement is one autocommit statement sent as postgres-nio's unnamed statement (through
/// `PostgresClient.query`, or `query` on a connection the client leased): no session advisory
/// locks, `LISTEN`/`NOTIFY`, `SET`, temporary tables or named prepared statements, so it works
/// through a transaction-pooling pooler (pgbouncer `pool_mode = transaction`), without superuser
/// rights or extensions. See <doc:SingleFlightAcrossProcesses>.
///
/// The client must be running (`PostgresClient.run()`) for as long as this object is used.
public final class PostgresSingleFlight: Sendable {
    private let client: PostgresClient
    private let lease: Duration
    private let logger: Logger
    private let statementTimeout: Duration
    private let maximumPollInterval: Duration
    private let statements: SingleFlightStatements
    /// The in-process merge: one flight per key at a time, nothing cached (the database is the
    /// cache). Internal, not private: the tests read its counters to know every caller joined.
    /// Its loads report through a completion (``FlightRun``): a statement's timeout answers the
    /// callers while the statement runs on.
    let flights = KeyedMonoTask<ProcessFlight, FlightOutput>(
        maximumEntries: 1, resultExpireDuration: .zero, clock: CoarseContinuousClock(),
        logger: .silent(label: "TaskKitPostgres")
    ) { flight, completion in
        flight.start(completion)
    }

    /// Creates a single-flight coordinator over `client`.
    ///
    /// - Parameters:
    ///   - client: The postgres-nio client; it must be running (`run()`) while this is used.
    ///     Directly to PostgreSQL or through a transaction-pooling pooler.
    ///   - tableName: The table holding the claims and results: an SQL identifier, optionally
    ///     schema-qualified (`"cache.single_flight"`). Create it with ``prepare()``.
    ///   - lease: How long a claim lives without a heartbeat: the time within which a killed
    ///     holder's `load` is taken over by another process. The holder renews it every third of
    ///     it. Every database statement is also bounded by it (at most 10 seconds).
    ///   - logger: Where claims, take-overs and failed heartbeats or stores are logged (debug and
    ///     warning levels). Silent by default.
    public convenience init(
        client: PostgresClient,
        tableName: String = "taskkit_single_flight",
        lease: Duration = .seconds(30),
        logger: Logger = .silent(label: "TaskKitPostgres")
    ) {
        self.init(
            client: client, tableName: tableName, lease: lease, logger: logger,
            statementTimeout: min(lease, .seconds(10)), maximumPollInterval: min(lease / 8, .milliseconds(250))
        )
    }

    /// The designated initializer, with the bounds the public one derives from `lease`.
    init(
        client: PostgresClient, tableName: String, lease: Duration, logger: Logger,
        statementTimeout: Duration, maximumPollInterval: Duration
    ) {
        precondition(lease > .zero, "lease: \(lease) must be positive")
        precondition(statementTimeout > .zero, "statementTimeout: \(statementTimeout) must be positive")
        self.client = client
        self.lease = lease
        self.logger = logger
        self.statementTimeout = statementTimeout
        self.maximumPollInterval = max(maximumPollInterval, .milliseconds(1))
        self.statements = SingleFlightStatements(table: tableName)
    }

    /// The table's name.
    var tableName: String { statements.table }

    /// Creates the table if it does not exist. Idempotent, and safe to call from many processes
    /// at once (a concurrent creation's error is tolerated).
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func prepare() async throws {
        do {
            try await execute(statements.create, statement: "prepare")
        } catch let PostgresSingleFlightError.databaseFailure(_, underlying as PSQLError)
            where ["23505", "42710", "42P07"].contains(underlying.serverInfo?[.sqlState] ?? "")
        {
            logger.debug("PostgresSingleFlight: concurrent table creation tolerated")
        }
    }

    /// The value for `key`: a stored result that is still fresh, else the result of the one
    /// `load` running for the key anywhere in the fleet, else the result of `load`, run here
    /// while this process holds the key's claim.
    ///
    /// - Parameters:
    ///   - key: Any string (hashed with SHA-256: length and content do not matter).
    ///   - resultExpireDuration: How long after it is stored the result is served to later
    ///     callers. With `.zero` (default) it is only given to the callers that waited for its
    ///     load; with `nil`, until it is invalidated. Must not be negative.
    ///   - load: Produces the value; runs at most once at a time per key across every process
    ///     sharing the table. Its value is stored as JSON; a stored value that no longer decodes
    ///     as `Value` is treated as missing and loaded again.
    /// - Returns: The value.
    /// - Throws: `load`'s error, for the callers merged with it in this process;
    ///   ``PostgresSingleFlightError`` when the database fails or does not answer in time;
    ///   `CancellationError` when the calling task is cancelled (the others go on).
    public func value<Value: Codable & Sendable>(
        forKey key: String,
        resultExpireDuration: Duration? = .zero,
        load: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        if let resultExpireDuration {
            precondition(
                resultExpireDuration >= .zero,
                "PostgresSingleFlight: resultExpireDuration must be >= .zero (or nil), got \(resultExpireDuration)"
            )
        }
        let digest = KeyDigest(key)
        // Merged before the first read: a burst of callers of a key makes one read, not one each
        // (the reads of 50 callers at once queue for the pool's connections past their deadline).
        let output = try await flights.value(
            for: ProcessFlight(key: digest.hex) { completion in
                FlightRun.launch(completion: completion) { run in
                    try await self.fly(
                        digest, resultExpireDuration: resultExpireDuration, run: run,
                        output: { value, data in FlightOutput(data: data, value: value) }, load: load)
                }
            }
        )
        if let value = output.value as? Value { return value }
        do {
            return try JSONDecoder().decode(Value.self, from: output.data)
        } catch {
            throw PostgresSingleFlightError.valueDoesNotDecode(underlying: error)
        }
    }

    /// Drops the stored result for `key`: the next caller loads again. A `load` in progress is
    /// left alone, and its result is stored when it ends.
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func invalidate(_ key: String) async throws {
        try await execute(statements.invalidate(KeyDigest(key)), statement: "invalidate")
    }

    // MARK: - The flight

    /// One process's flight for a key, in `run`'s task: read; serve a fresh or newly stored
    /// result; else claim and load, or poll while another caller holds the claim. Also the
    /// flight of ``PostgresFleetCache``'s local tier, which merges its callers itself. A fresh
    /// value found by the first read is answered through `run` from the thread its reply arrived
    /// on; `output` makes the run's output of a value and its JSON.
    func fly<Value: Codable & Sendable, Output: Sendable>(
        _ key: KeyDigest,
        resultExpireDuration: Duration?,
        run: FlightRun<Output>,
        output: @escaping @Sendable (Value, Data) -> Output,
        load: @escaping @Sendable () async throws -> Value
    ) async throws -> Output {
        // The first read's fresh value answers the callers from the reply's thread, the event
        // loop: only a small one, as its decoding holds up the loop's other connections.
        let answerFresh: @Sendable (Row) -> Void = { row in
            guard row.fresh, let data = row.value, data.count <= Self.largestAnsweredOnEventLoop,
                  let value = try? JSONDecoder().decode(Value.self, from: data)
            else { return }
            run.answer(output(value, data))
        }
        var arrivalGeneration: Int64?
        var pollInterval = Duration.milliseconds(5)
        while true {
            let row = try await read(key, in: run, answer: arrivalGeneration == nil ? answerFresh : nil)
            let generation = row?.generation ?? 0
            if arrivalGeneration == nil { arrivalGeneration = generation }
            var undecodable = false
            if let row, let data = row.value, row.fresh || generation != arrivalGeneration {
                if let value = try? JSONDecoder().decode(Value.self, from: data) {
                    return output(value, data)
                }
                undecodable = true
                logger.debug("PostgresSingleFlight: a stored value does not decode; loading again",
                             metadata: ["key_hash": "\(key.hex)"])
            }
            if row?.claimed == true {
                let jittered = pollInterval * Double.random(in: 0.5...1)
                try await Task.sleep(for: jittered)
                pollInterval = min(pollInterval * 2, maximumPollInterval)
                continue
            }
            let token = UUID()
            let claimed = try await query(
                statements.claim(key, token: token, lease: lease, generation: generation,
                                 replacingUndecodable: undecodable),
                statement: "claim", in: run
            ) > 0
            if claimed {
                let (value, data) = try await runClaimed(
                    key, token: token, resultExpireDuration: resultExpireDuration, load: load)
                return output(value, data)
            }
        }
    }

    /// Runs `load` while holding the claim `token`, renewing it every third of the lease; stores
    /// the result (or releases the claim on failure).
    private func runClaimed<Value: Codable & Sendable>(
        _ key: KeyDigest,
        token: UUID,
        resultExpireDuration: Duration?,
        load: @escaping @Sendable () async throws -> Value
    ) async throws -> (value: Value, data: Data) {
        logger.debug("PostgresSingleFlight: claimed; loading", metadata: ["key_hash": "\(key.hex)"])
        let result: Result<(value: Value, data: Data), any Error> = await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.heartbeat(key, token: token) }
            defer { group.cancelAll() }
            do {
                let value = try await load()
                return .success((value, try JSONEncoder().encode(value)))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case let .success(output):
            do {
                let stored = try await query(
                    statements.store(key, token: token, value: output.data, expireAfter: resultExpireDuration),
                    statement: "store"
                ) > 0
                if !stored {
                    // Its row was taken over after the lease expired, or deleted by an invalidation
                    // or a put (`PostgresFleetCache`): either way the result is not the key's any more.
                    logger.warning("PostgresSingleFlight: the claim was no longer held when the result was ready (the lease expired, or the key was invalidated or put); not stored",
                                   metadata: ["key_hash": "\(key.hex)"])
                }
            } catch {
                logger.warning("PostgresSingleFlight: storing the result failed: \(error)",
                               metadata: ["key_hash": "\(key.hex)"])
            }
            return output
        case let .failure(error):
            do {
                try await execute(statements.release(key, token: token), statement: "release")
            } catch {
                logger.warning("PostgresSingleFlight: releasing the claim failed (it expires within the lease): \(error)",
                               metadata: ["key_hash": "\(key.hex)"])
            }
            throw error
        }
    }

    /// Renews the claim every third of the lease until cancelled, or until the claim is lost.
    private func heartbeat(_ key: KeyDigest, token: UUID) async {
        while true {
            do {
                try await Task.sleep(for: lease / 3)
            } catch {
                return
            }
            do {
                let held = try await query(statements.heartbeat(key, token: token, lease: lease),
                                           statement: "heartbeat") > 0
                if !held {
                    logger.warning("PostgresSingleFlight: the claim was lost (it expired and was taken over)",
                                   metadata: ["key_hash": "\(key.hex)"])
                    return
                }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("PostgresSingleFlight: a heartbeat failed: \(error)", metadata: ["key_hash": "\(key.hex)"])
            }
        }
    }

    // MARK: - Statements

    private struct Row: Sendable {
        let generation: Int64
        let value: Data?
        let fresh: Bool
        let claimed: Bool

        /// Decoded by `PostgresRow.decode`, which is specialized here; the row sequence's `decode`
        /// of a tuple is not, and cost a few percent of a read (Benchmarks/NOTES.md).
        init(_ row: PostgresRow) throws {
            let (generation, value, fresh, claimed) = try row.decode((Int64, Data?, Bool?, Bool?).self)
            self.generation = generation
            self.value = value
            self.fresh = fresh ?? false
            self.claimed = claimed ?? false
        }
    }

    /// The largest stored value (its JSON, in bytes) decoded on the event loop its reply arrived
    /// on; a larger one is decoded in the flight's task.
    static let largestAnsweredOnEventLoop = 16 * 1024

    /// The logger of the read's query: postgres-nio's own debug messages are not the flight's.
    private static let queryLogger = Logger.silent(label: "TaskKitPostgres.read")

    /// Reads `key`'s row in `run`'s task. With `answer`, the row is also given to it as soon as
    /// the reply arrives, on the connection's event loop, before this task resumes: a fresh value
    /// answers the callers from there, with no hop to this task and from it to them (the query
    /// through the connection's `EventLoopFuture`, leased for as long as it runs).
    private func read(
        _ key: KeyDigest, in run: some FlightEnding, answer: (@Sendable (Row) -> Void)?
    ) async throws -> Row? {
        let query = statements.read(key)
        return try await run.statement("read", timeout: statementTimeout) {
            try await client.withConnection { connection in
                let reply: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: Self.queryLogger)
                if let answer {
                    reply.whenSuccess { result in
                        if let first = result.rows.first, let row = try? Row(first) { answer(row) }
                    }
                }
                let rows = try await reply.get().rows
                // Answered from the event loop: the flight ends here (see `statement`).
                if run.hasEnded { throw CancellationError() }
                return try rows.first.map(Row.init)
            }
        }
    }

    /// Runs `query` in `run`'s task and returns how many rows it returned.
    private func query(_ query: PostgresQuery, statement: String, in run: some FlightEnding) async throws -> Int {
        try await run.statement(statement, timeout: statementTimeout) {
            try await Self.count(try await client.query(query))
        }
    }

    /// Runs `query` in a task of its own (``withStatementDeadline(_:statement:timers:_:)``):
    /// statements outside a flight's reads and claims, whose callers wait for them alone.
    private func query(_ query: PostgresQuery, statement: String) async throws -> Int {
        let client = self.client
        return try await withStatementDeadline(statementTimeout, statement: statement) {
            try await Self.count(try await client.query(query))
        }
    }

    /// The number of rows of `rows`.
    private static func count(_ rows: PostgresRowSequence) async throws -> Int {
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }

    private func execute(_ query: PostgresQuery, statement: String) async throws {
        _ = try await self.query(query, statement: statement)
    }
}

#endif
