#if PostgreSQL
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import Synchronization
import TaskKit

/// A two-tier cache that stays coherent across every process sharing a PostgreSQL database: one
/// invalidation, in any process, reaches every process's local copy.
///
/// ```swift
/// let profiles = PostgresFleetCache<Profile>(client: client, maximumEntries: 50_000) { key in
///     try await profileService.fetch(key)
/// }
/// try await profiles.prepare()
/// group.addTask { await profiles.run() }   // receives the fleet's invalidations
///
/// let ada = try await profiles.value(forKey: "user:42")
/// try await profileService.update(ada)
/// try await profiles.invalidate("user:42")  // every process loads it again, once for the fleet
/// ```
///
/// - **Local tier (L1).** A `KeyedMonoTask` in each process: a hit returns from memory and never
///   touches the database; it is bounded by `maximumEntries` (SIEVE eviction), merges a key's
///   concurrent callers, and keeps a value for `localExpireDuration`.
/// - **Shared tier (L2).** A miss goes to ``PostgresSingleFlight``'s table: a stored value is
///   read, else one process in the fleet claims the key and runs `load`, and every other process
///   waits for its result. A key is loaded once per invalidation across the fleet.
/// - **Invalidation.** ``PostgresFleetCache/invalidate(_:)``, ``PostgresFleetCache/invalidate(keys:)``, ``PostgresFleetCache/invalidate(tag:)`` and
///   ``PostgresFleetCache/invalidateAll()`` clear the shared rows and notify the fleet in one autocommit statement
///   (`pg_notify` is transactional: the notification is sent when the change commits, and only
///   then). ``PostgresFleetCache/put(_:forKey:)`` stores a value the same way. Keys travel as SHA-256 digests, at
///   most 100 per notification, so any key fits.
/// - **Delivery** (``PostgresFleetCache/invalidationMode``): ``PostgresFleetCacheInvalidation/listen``, a `LISTEN` on
///   one connection of `client` that ``PostgresFleetCache/run()`` holds: a process serves a value invalidated
///   elsewhere for at most the notification's delivery time (milliseconds on a local network).
///   ``PostgresFleetCacheInvalidation/polling(every:)``: ``PostgresFleetCache/run()`` reads the invalidation log
///   at that interval, through any connection (a transaction pooler too): at most the interval
///   plus one poll's round trip. Every invalidation is written to the log and notified, so a
///   fleet may mix the modes.
/// - **Nothing missed silently.** When the listening connection drops (a restart, a failover,
///   `pg_terminate_backend`), ``PostgresFleetCache/run()`` reconnects with `reconnectBackoff` and, since
///   notifications may have been missed meanwhile, drops the whole local tier once it listens
///   again (counted in ``PostgresFleetCacheCounters/resyncs``). While it does not listen (before
///   the first `LISTEN` too), a local value older than `maximumAgeWhileDisconnected` is not
///   served: it is read again from the shared tier, and a caller gets the database's error
///   (``PostgresSingleFlightError``) when that fails.
///
/// Every statement is bounded by the lease, at most 10 seconds. The shared tier works through
/// a transaction-pooling pooler; the listener needs a direct connection (a notification does not
/// cross pgbouncer in transaction mode). See <doc:CachingAcrossReplicas>.
public final class PostgresFleetCache<Value: Codable & Sendable>: Sendable {
    /// The local tier's entries are not generic (``FleetCacheEntry``), so that the local tier is
    /// a `KeyedMonoTask` of concrete types, specialized where it is used: with a generic entry
    /// its hit ran KeyedMonoTask's unspecialized code, most of it generic-metadata lookups (see
    /// Benchmarks/NOTES.md). Every entry's value is a `Value`: only the loader below and
    /// ``PostgresFleetCache/put(_:forKey:)`` store entries.
    @usableFromInline typealias Entry = FleetCacheEntry

    /// How invalidations from other processes reach this one.
    public let invalidationMode: PostgresFleetCacheInvalidation
    private let client: PostgresClient
    private let flight: PostgresSingleFlight
    private let statements: FleetCacheStatements
    /// The local tier. Internal, not private: the tests read its count; `@usableFromInline`:
    /// ``value(forKey:)``'s hit is inlined into the caller, with `KeyedMonoTask`'s.
    @usableFromInline let local: KeyedMonoTask<String, Entry>
    private let shared: FleetCacheState
    private let resultExpireDuration: Duration?
    private let maximumAgeWhileDisconnected: Duration
    private let reconnectBackoff: IntervalProxy
    private let statementTimeout: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let logger: Logger

    /// Creates a cache of `Value`s over `client`'s database.
    ///
    /// - Parameters:
    ///   - client: The postgres-nio client, running (`run()`) while the cache is used; directly to
    ///     PostgreSQL: ``PostgresFleetCache/run()`` holds one of its connections to listen.
    ///   - tableName: The shared tier's table (an SQL identifier of at most 57 characters,
    ///     optionally schema-qualified); `<tableName>_tags` holds the tags. Create them with
    ///     ``PostgresFleetCache/prepare()``. Every process of the fleet passes the same name.
    ///   - invalidation: How other processes' invalidations arrive. Default:
    ///     ``PostgresFleetCacheInvalidation/listen``.
    ///   - maximumEntries: The most values the local tier holds (see `KeyedMonoTask`); must be
    ///     greater than 0.
    ///   - resultExpireDuration: How long a value stored in the shared tier is served, counted
    ///     from its store; `nil` (default): until it is invalidated.
    ///   - localExpireDuration: How long the local tier keeps a value without asking the shared
    ///     tier again: a backstop, since invalidations drop it anyway. `nil`: until it is
    ///     invalidated or evicted. Default: 5 minutes.
    ///   - maximumAgeWhileDisconnected: While invalidations are not being received, a local value
    ///     whose load began longer ago than this is not served but read again from the shared
    ///     tier: the bound on a value's staleness when the listener is down. Default: 5 seconds.
    ///   - lease: The shared tier's claim lease (see ``PostgresSingleFlight``); also bounds every
    ///     statement (at most 10 seconds).
    ///   - reconnectBackoff: The delays between attempts to listen again after the connection
    ///     dropped (the `n`th failure in a row waits `delay(forRetry: n)`). Default: from 100 ms,
    ///     doubling, at most 5 seconds, full jitter.
    ///   - clock: The clock of the local tier's expiry, of a value's age, and of the reconnection
    ///     backoff. Default: `CoarseContinuousClock`.
    ///   - logger: Where the mode, connections, reconnections and resyncs are logged. Silent by
    ///     default.
    ///   - tags: The tags of a key, for ``PostgresFleetCache/invalidate(tag:)`` (`"user:42"`, `"catalog"`); called
    ///     before each load through the shared tier, whose rows are tagged before the value is
    ///     stored. `nil` (default): no tags.
    ///   - load: Loads a key's value from the source of truth: at most once at a time per key in
    ///     the fleet. Stored as JSON in the shared tier.
    public init(
        client: PostgresClient,
        tableName: String = "taskkit_fleet_cache",
        invalidation: PostgresFleetCacheInvalidation = .listen,
        maximumEntries: Int = 10_000,
        resultExpireDuration: Duration? = nil,
        localExpireDuration: Duration? = .seconds(300),
        maximumAgeWhileDisconnected: Duration = .seconds(5),
        lease: Duration = .seconds(30),
        reconnectBackoff: IntervalProxy = .exponential(
            initial: .milliseconds(100), maximumDelay: .seconds(5), jitter: .full),
        clock: some Clock<Duration> = CoarseContinuousClock(),
        logger: Logger = .silent(label: "TaskKitPostgres"),
        tags: (@Sendable (String) -> Set<String>)? = nil,
        load: @escaping @Sendable (String) async throws -> Value
    ) {
        precondition(maximumEntries > 0, "maximumEntries: \(maximumEntries) must be greater than 0")
        precondition(
            maximumAgeWhileDisconnected >= .zero,
            "maximumAgeWhileDisconnected: \(maximumAgeWhileDisconnected) must not be negative"
        )
        let statements = FleetCacheStatements(table: tableName)
        let flight = PostgresSingleFlight(client: client, tableName: tableName, lease: lease, logger: logger)
        let origin = clock.now
        let elapsed: @Sendable () -> Duration = { origin.duration(to: clock.now) }
        let shared = FleetCacheState(
            elapsed: elapsed, maximumKeys: max(4 * maximumEntries, 1_024)
        )
        let statementTimeout = min(lease, .seconds(10))
        self.invalidationMode = invalidation
        self.client = client
        self.flight = flight
        self.statements = statements
        self.shared = shared
        self.resultExpireDuration = resultExpireDuration
        self.maximumAgeWhileDisconnected = maximumAgeWhileDisconnected
        self.reconnectBackoff = reconnectBackoff
        self.statementTimeout = statementTimeout
        self.sleep = { try await clock.sleep(for: $0) }
        self.logger = logger
        // The local tier's loader holds the shared state and the flight, never `self`. Its load
        // reports through a completion (``FlightRun``), so that a statement's timeout answers the
        // callers while the statement runs on, and a stored hit is answered from the thread its
        // reply arrived on. The local tier merges this process's callers: the flight runs
        // without the single flight's own merge.
        let local = KeyedMonoTask<String, Entry>(
            maximumEntries: maximumEntries, resultExpireDuration: localExpireDuration, clock: clock, logger: logger
        ) { key, completion in
            FlightRun.launch(completion: completion) { run in
                let loadedAt = elapsed()
                let digest = KeyDigest(key)
                if shared.remember(key, digest: digest.hex) {
                    // The index of keys overflowed and was emptied: so is the local tier.
                    shared.dropLocal?()
                }
                let tagHashes = tags.map { tags in tags(key).map { KeyDigest($0).hex } } ?? []
                if !tagHashes.isEmpty {
                    let query = statements.tag(digest.hex, with: tagHashes)
                    try await run.statement("tag", timeout: statementTimeout) {
                        for try await _ in try await client.query(query) {}
                    }
                }
                return try await flight.fly(
                    digest, resultExpireDuration: resultExpireDuration, run: run,
                    output: { (value: Value, _) in Entry(box: FleetCacheValueBox(value), loadedAt: loadedAt) }
                ) {
                    try await load(key)
                }
            }
        }
        self.local = local
        shared.setDropLocal { [weak local] in
            local?.invalidateAll()
        }
    }

    /// Whether invalidations are being received now: the listener is connected and listening.
    /// While `false`, a local value is served only within `maximumAgeWhileDisconnected` of its load.
    public var isReceivingInvalidations: Bool {
        shared.receiving.load(ordering: .relaxed)
    }

    /// The counters of invalidations received and resyncs.
    public var counters: PostgresFleetCacheCounters {
        shared.counters
    }

    /// The name of the channel the fleet's notifications use (derived from the table's name).
    public var channel: String { statements.channel }

    /// Creates the tables if they do not exist. Idempotent; safe from many processes at once.
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func prepare() async throws {
        try await flight.prepare()
        do {
            try await execute(statements.createTags, statement: "prepare")
            try await execute(statements.createLog, statement: "prepare")
        } catch let PostgresSingleFlightError.databaseFailure(_, underlying as PSQLError)
            where ["23505", "42710", "42P07"].contains(underlying.serverInfo?[.sqlState] ?? "")
        {
            logger.debug("PostgresFleetCache: concurrent table creation tolerated")
        }
    }

    // MARK: - Values

    /// The value of `key`: from the local tier (no database round trip), else from the shared
    /// tier, else from the one `load` of the key running in the fleet, or started here.
    ///
    /// While invalidations are not received (``PostgresFleetCache/isReceivingInvalidations`` is `false`), a local
    /// value loaded longer than `maximumAgeWhileDisconnected` ago is read again from the shared
    /// tier instead.
    ///
    /// - Parameter key: Any string (hashed with SHA-256 in the database and in notifications).
    /// - Returns: The value.
    /// - Throws: `load`'s error; ``PostgresSingleFlightError`` when the database fails or does
    ///   not answer in time; `CancellationError` when the calling task is cancelled.
    @inlinable
    nonisolated(nonsending)
    public func value(forKey key: String) async throws -> Value {
        // Inlined, and specialized in the caller's module with KeyedMonoTask's own hit: called
        // across the module boundary, a generic cache's hit costs several times a plain one.
        // `nonisolated(nonsending)`, as KeyedMonoTask's: a hit runs on the caller's executor,
        // with no hop to the global one and back.
        let entry = try await local.value(for: key)
        guard isServable(entry) else { return try await reload(forKey: key) }
        return Self.value(of: entry)
    }

    /// Whether `entry` may be served: invalidations are received, or it was loaded within
    /// `maximumAgeWhileDisconnected`.
    @usableFromInline
    func isServable(_ entry: Entry) -> Bool {
        shared.receiving.load(ordering: .relaxed) || shared.elapsed() - entry.loadedAt <= maximumAgeWhileDisconnected
    }

    /// `key`'s value read again past the local tier (an entry too old to serve while
    /// invalidations are not received).
    @usableFromInline
    nonisolated(nonsending)
    func reload(forKey key: String) async throws -> Value {
        Self.value(of: try await local.value(for: key, forceUpdate: true))
    }

    /// An entry's value. `unsafeDowncast` (checked in debug builds only): every entry's box is a
    /// `FleetCacheValueBox<Value>`, since only the loader above and ``PostgresFleetCache/put(_:forKey:)``
    /// store entries in this cache's local tier, and both box a `Value`.
    @inlinable
    static func value(of entry: Entry) -> Value {
        unsafeDowncast(entry.box, to: FleetCacheValueBox<Value>.self).value
    }

    /// Stores `value` as `key`'s value in the shared tier and in this process's local tier, and
    /// drops the key from every other process's local tier (they read it from the shared tier at
    /// their next call). A load of the key in progress anywhere does not store its result over
    /// this one.
    ///
    /// - Throws: `EncodingError` when `value` does not encode as JSON (nothing changed anywhere);
    ///   ``PostgresSingleFlightError``: nothing was stored, and the key is dropped from this
    ///   process's local tier.
    public func put(_ value: Value, forKey key: String) async throws {
        let digest = KeyDigest(key)
        // As a loaded value that does not encode: the encoder's own error, before anything changes.
        let data = try JSONEncoder().encode(value)
        let payload = FleetInvalidationMessage.payloads(origin: shared.origin, keyHashes: [digest.hex])[0]
        let loadedAt = shared.elapsed()
        if shared.remember(key, digest: digest.hex) { shared.dropLocal?() }
        do {
            try await execute(
                statements.put(digest, value: data, expireAfter: resultExpireDuration, payload: payload),
                statement: "put"
            )
        } catch {
            local.invalidate(key)
            throw error
        }
        local.put(Entry(box: FleetCacheValueBox(value), loadedAt: loadedAt), for: key)
    }

    // MARK: - Invalidation

    /// Drops `key` from the shared tier and from every process's local tier: the next caller in
    /// the fleet loads it again (once). A load of the key in progress anywhere still answers the
    /// callers waiting for it, but its result is neither stored nor kept.
    ///
    /// - Throws: ``PostgresSingleFlightError``: the shared tier or the other processes may still
    ///   hold the value (this process's local tier does not).
    public func invalidate(_ key: String) async throws {
        try await invalidate(keys: [key])
    }

    /// ``PostgresFleetCache/invalidate(_:)`` for many keys, in one statement (notified in batches of 100 keys).
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func invalidate(keys: some Sequence<String>) async throws {
        var seen = Set<String>()
        let pairs = keys.compactMap { key -> (String, String)? in
            seen.insert(key).inserted ? (key, KeyDigest(key).hex) : nil
        }
        guard !pairs.isEmpty else { return }
        defer { for (key, _) in pairs { local.invalidate(key) } }
        let hashes = pairs.map(\.1)
        try await execute(
            statements.invalidate(
                keyHashes: hashes,
                payloads: FleetInvalidationMessage.payloads(origin: shared.origin, keyHashes: hashes)
            ),
            statement: "invalidate"
        )
    }

    /// Drops every key tagged `tag` (by the cache's `tags`) from the shared tier and from every
    /// process's local tier, as ``PostgresFleetCache/invalidate(_:)`` does. The keys are those whose rows were tagged
    /// when the statement runs, however many (notified in batches of 100 keys).
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func invalidate(tag: String) async throws {
        let client = self.client
        let query = statements.invalidate(
            tagHash: KeyDigest(tag).hex, prefix: shared.origin, keysPerPayload: FleetInvalidationMessage.keysPerPayload
        )
        let hashes = try await withStatementDeadline(statementTimeout, statement: "invalidate tag") {
            var hashes: [String] = []
            for try await (hash, _) in try await client.query(query).decode((String, Int64).self) {
                hashes.append(hash)
            }
            return hashes
        }
        receive(.init(origin: "", target: .keys(hashes)))
    }

    /// Drops every key from the shared tier and from every process's local tier.
    ///
    /// - Throws: ``PostgresSingleFlightError``.
    public func invalidateAll() async throws {
        defer { shared.dropLocal?() }
        try await execute(
            statements.invalidateAll(payload: FleetInvalidationMessage.allPayload(origin: shared.origin)),
            statement: "invalidate all"
        )
    }

    /// Applies a message from another process (or this one's tag invalidation).
    func receive(_ message: FleetInvalidationMessage) {
        switch message.target {
        case .all:
            shared.dropLocal?()
        case let .keys(hashes):
            for hash in hashes {
                if let key = shared.key(forDigest: hash) { local.invalidate(key) }
            }
        }
    }

    // MARK: - Receiving

    /// Receives the fleet's invalidations until the calling task is cancelled: run it in a task
    /// of its own for as long as the cache is used (like `PostgresClient.run()`).
    ///
    /// With ``PostgresFleetCacheInvalidation/listen``: holds one of the client's connections and
    /// listens on ``PostgresFleetCache/channel``. Each time it starts listening after the first, it drops the local
    /// tier (a resync: notifications may have been missed). When the connection drops, it tries
    /// again after `reconnectBackoff`'s delay; ``PostgresFleetCache/isReceivingInvalidations`` is `false` meanwhile.
    ///
    /// With ``PostgresFleetCacheInvalidation/polling(every:)``: reads the log's new rows at each
    /// interval; a failed poll makes ``PostgresFleetCache/isReceivingInvalidations`` `false` until one succeeds,
    /// and after a gap longer than half the log's retention (5 of its 10 minutes)
    /// the local tier is dropped (a resync).
    ///
    /// In both modes it also deletes the log's rows older than 10 minutes, every minute.
    public func run() async {
        logger.info("PostgresFleetCache: receiving invalidations by \(invalidationMode)",
                    metadata: ["channel": "\(statements.channel)", "table": "\(statements.table)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.pruneLog() }
            switch invalidationMode.mode {
            case .listen:
                await listen()
            case let .polling(interval):
                await poll(every: interval)
            }
            group.cancelAll()
        }
    }

    /// How long the log keeps an invalidation: the same in every mode and every replica, so that
    /// a replica that prunes never deletes rows a polling replica still counts on. A polling
    /// replica that has not read the log for longer than half of this drops its local tier (it
    /// may have missed rows).
    static var logRetention: Duration { .seconds(600) }

    /// Deletes the log's rows older than the retention every minute, until cancelled.
    private func pruneLog() async {
        while true {
            do {
                try await sleep(.seconds(60))
            } catch {
                return
            }
            do {
                try await execute(statements.pruneLog(retention: Self.logRetention), statement: "prune log")
            } catch {
                logger.debug("PostgresFleetCache: pruning the log failed: \(String(reflecting: error))")
            }
        }
    }

    /// The polling mode: reads the log's new rows every `interval`.
    ///
    /// Ids come from a sequence, and a row with a smaller id may commit after one with a larger
    /// id: rows written within the last `settle` are read again at each poll (applied once, by
    /// id), and the position moves past a row only once it is settled.
    private func poll(every interval: Duration) async {
        let settle = statementTimeout
        var position: Int64?
        var applied = Set<Int64>()
        var lastSuccess: Duration?
        var polls = 0
        let client = self.client
        while !Task.isCancelled {
            do {
                if let current = position {
                    let query = statements.log(after: current, settle: settle)
                    let rows = try await withStatementDeadline(statementTimeout, statement: "poll") {
                        var rows: [(Int64, String, Bool)] = []
                        for try await row in try await client.query(query).decode((Int64, String, Bool).self) {
                            rows.append(row)
                        }
                        return rows
                    }
                    if let last = lastSuccess, shared.elapsed() - last > Self.logRetention / 2 {
                        // Rows this instance never read may have been pruned.
                        subscribed(resync: true)
                    }
                    var settledPrefix = true
                    var next = current
                    for (id, payload, settled) in rows {
                        if applied.insert(id).inserted, let message = FleetInvalidationMessage(payload: payload) {
                            // Counted once applied: a counter that grew names keys already dropped.
                            if message.origin != shared.origin { receive(message) }
                            shared.counters(received: message)
                        }
                        if settledPrefix, settled { next = id } else { settledPrefix = false }
                    }
                    if next != current {
                        position = next
                        applied = applied.filter { $0 > next }
                    }
                } else {
                    let query = statements.logHead
                    position = try await withStatementDeadline(statementTimeout, statement: "poll") {
                        var head: Int64 = 0
                        for try await id in try await client.query(query).decode(Int64.self) { head = id }
                        return head
                    }
                    polls += 1
                    subscribed(resync: polls > 1)
                }
                lastSuccess = shared.elapsed()
                shared.receiving.store(true, ordering: .relaxed)
            } catch {
                if Task.isCancelled { break }
                if shared.receiving.exchange(false, ordering: .relaxed) {
                    logger.warning("PostgresFleetCache: polling the log failed: \(String(reflecting: error))")
                }
            }
            do {
                try await sleep(interval)
            } catch {
                break
            }
        }
        shared.receiving.store(false, ordering: .relaxed)
    }

    private func listen() async {
        var failures = 0
        var subscriptions = 0
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: statements.channel) { notifications in
                        subscriptions += 1
                        failures = 0
                        self.subscribed(resync: subscriptions > 1)
                        for try await notification in notifications {
                            guard let message = FleetInvalidationMessage(payload: notification.payload) else {
                                logger.debug("PostgresFleetCache: ignored a notification that is not an invalidation")
                                continue
                            }
                            // Counted once applied: a counter that grew names keys already dropped.
                            if message.origin != shared.origin { receive(message) }
                            shared.counters(received: message)
                        }
                    }
                }
                if Task.isCancelled { break }
                logger.warning("PostgresFleetCache: the listening connection ended; reconnecting")
            } catch {
                if Task.isCancelled { break }
                logger.warning("PostgresFleetCache: listening failed; reconnecting: \(String(reflecting: error))")
            }
            shared.receiving.store(false, ordering: .relaxed)
            failures += 1
            do {
                try await sleep(reconnectBackoff.delay(forRetry: failures))
            } catch {
                break
            }
        }
        shared.receiving.store(false, ordering: .relaxed)
    }

    /// The listener listens: drop the local tier when this is a reconnection, then serve local
    /// values again.
    private func subscribed(resync: Bool) {
        if resync {
            shared.dropLocal?()
            shared.resyncs.add(1, ordering: .relaxed)
            logger.warning("PostgresFleetCache: receiving again; dropped the local tier (invalidations may have been missed)")
        } else {
            logger.info("PostgresFleetCache: receiving invalidations by \(invalidationMode)",
                        metadata: ["channel": "\(statements.channel)"])
        }
        shared.receiving.store(true, ordering: .relaxed)
    }

    // MARK: - Statements

    private func execute(_ query: PostgresQuery, statement: String) async throws {
        let client = self.client
        try await withStatementDeadline(statementTimeout, statement: statement) {
            for try await _ in try await client.query(query) {}
        }
    }
}

/// How a ``PostgresFleetCache`` receives the fleet's invalidations.
public struct PostgresFleetCacheInvalidation: Sendable, Hashable, CustomStringConvertible {
    enum Mode: Sendable, Hashable {
        case listen
        case polling(Duration)
    }

    let mode: Mode

    /// `LISTEN` on one connection of the client, held by ``PostgresFleetCache/run()``: an
    /// invalidation reaches every process as soon as its statement commits (its delivery time,
    /// milliseconds on a local network). Needs a direct connection to PostgreSQL (or a pooler in
    /// session mode): notifications do not cross a transaction-pooling pooler.
    public static var listen: Self { Self(mode: .listen) }

    /// Reading the invalidation log (`<tableName>_log`) every `interval`, with ordinary
    /// statements: works through a transaction-pooling pooler (pgbouncer `pool_mode =
    /// transaction`), where notifications do not arrive. A process serves a value invalidated
    /// elsewhere for at most `interval` plus one poll's round trip (and then one load).
    ///
    /// - Parameter interval: The time between polls; must be positive and at most a minute.
    public static func polling(every interval: Duration) -> Self {
        precondition(interval > .zero && interval <= .seconds(60),
                     "interval: \(interval) must be positive and at most 60 seconds")
        return Self(mode: .polling(interval))
    }

    /// The mode's name: `"LISTEN/NOTIFY"` or `"polling every <interval>"`.
    public var description: String {
        switch mode {
        case .listen: "LISTEN/NOTIFY"
        case let .polling(interval): "polling every \(interval)"
        }
    }
}

/// What a ``PostgresFleetCache`` has received; every counter only grows.
public struct PostgresFleetCacheCounters: Sendable, Hashable {
    /// Notifications received, this process's own included. Every counter grows only after the
    /// message was applied: once it names a key, that key is no longer served from this process's
    /// local tier.
    public var notifications: Int
    /// Keys named by the notifications of other processes.
    public var keysInvalidated: Int
    /// Notifications of other processes that dropped everything (``PostgresFleetCache/invalidateAll()``).
    public var allInvalidated: Int
    /// Times the local tier was dropped because the listener listened again after its connection
    /// dropped (notifications may have been missed).
    public var resyncs: Int
    /// Times the local tier was dropped because its index of keys (digest to key, at most four
    /// times `maximumEntries`, at least 1,024) was full.
    public var indexResets: Int
}

/// A value of a ``PostgresFleetCache``'s local tier, boxed (a `FleetCacheValueBox` of the
/// cache's `Value`), and when its load began (on the cache's clock). A class: a hit copies one
/// reference, where a struct entry was copied and destroyed through its value witnesses on every
/// hit (see Benchmarks/NOTES.md).
@usableFromInline
final class FleetCacheEntry: Sendable {
    @usableFromInline let box: AnyObject & Sendable
    let loadedAt: Duration

    init(box: AnyObject & Sendable, loadedAt: Duration) {
        self.box = box
        self.loadedAt = loadedAt
    }
}

/// A value of a ``PostgresFleetCache``'s local tier.
@usableFromInline
final class FleetCacheValueBox<Value: Sendable>: Sendable {
    @usableFromInline let value: Value
    init(_ value: Value) { self.value = value }
}

/// The part of a ``PostgresFleetCache`` that its local tier's loader shares (the loader must not
/// hold the cache): the index from key digests to keys, the receiving flag and the counters.
final class FleetCacheState: Sendable {
    /// This instance's origin in notifications (16 hex digits).
    let origin: String = String(UInt64.random(in: .min ... .max), radix: 16)
    /// The time since the cache was made, on its clock.
    let elapsed: @Sendable () -> Duration
    let receiving = Atomic<Bool>(false)
    let resyncs = Atomic<Int>(0)
    private let notifications = Atomic<Int>(0)
    private let keysInvalidated = Atomic<Int>(0)
    private let allInvalidated = Atomic<Int>(0)
    private let indexResets = Atomic<Int>(0)
    private let maximumKeys: Int
    /// Digest to key, of every key loaded or put since the index was last emptied: a superset of
    /// the local tier's keys (a key enters it when its load starts, before its value can be
    /// kept, and leaves it only when the index is emptied, together with the local tier).
    private let keys = NIOLockedValueBox([String: String]())
    /// Drops the local tier; set once, right after initialization.
    private let dropLocalBox = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)

    init(elapsed: @escaping @Sendable () -> Duration, maximumKeys: Int) {
        self.elapsed = elapsed
        self.maximumKeys = maximumKeys
    }

    var dropLocal: (@Sendable () -> Void)? { dropLocalBox.withLockedValue { $0 } }

    func setDropLocal(_ drop: @escaping @Sendable () -> Void) {
        dropLocalBox.withLockedValue { $0 = drop }
    }

    /// Records `key` under `digest`; returns `true` when the index was full and was emptied
    /// first (the caller must then drop the local tier).
    func remember(_ key: String, digest: String) -> Bool {
        let reset = keys.withLockedValue { keys -> Bool in
            if keys[digest] != nil { return false }
            var reset = false
            if keys.count >= maximumKeys {
                keys.removeAll(keepingCapacity: true)
                reset = true
            }
            keys[digest] = key
            return reset
        }
        if reset { indexResets.add(1, ordering: .relaxed) }
        return reset
    }

    func key(forDigest digest: String) -> String? {
        keys.withLockedValue { $0[digest] }
    }

    func counters(received message: FleetInvalidationMessage) {
        notifications.add(1, ordering: .relaxed)
        guard message.origin != origin else { return }
        switch message.target {
        case .all: allInvalidated.add(1, ordering: .relaxed)
        case let .keys(keys): keysInvalidated.add(keys.count, ordering: .relaxed)
        }
    }

    var counters: PostgresFleetCacheCounters {
        PostgresFleetCacheCounters(
            notifications: notifications.load(ordering: .relaxed),
            keysInvalidated: keysInvalidated.load(ordering: .relaxed),
            allInvalidated: allInvalidated.load(ordering: .relaxed),
            resyncs: resyncs.load(ordering: .relaxed),
            indexResets: indexResets.load(ordering: .relaxed)
        )
    }
}

#endif
