#if PostgreSQL
import Foundation
import NIOCore
import PostgresNIO

/// The SQL of ``PostgresSingleFlight``: every statement is one autocommit statement sent as
/// postgres-nio's unnamed statement (`PostgresClient.query`, or `query` on a connection the
/// client leased), so it works through a transaction-pooling pooler; times are the server's
/// (`clock_timestamp()`, and `now()` in the read, a statement of its own), so the processes'
/// clocks never matter.
///
/// The table, one row per key:
/// - `key_hash`: SHA-256 of the key (``KeyDigest``), the primary key;
/// - `key_prefix`: the key's first 200 UTF-8 bytes, for people reading the table;
/// - `claim_token`, `claim_expires_at`: the claim (the caller running `load`) and its lease;
///   the claim is live while `claim_expires_at` is in the future;
/// - `generation`: incremented whenever a result is stored or invalidated;
/// - `value`, `stored_at`, `result_expires_at`: the last stored result (JSON) and until when it
///   is served.
struct SingleFlightStatements: Sendable {
    let table: String
    /// The read's text, written once (the read is every call's statement): the table name is
    /// checked as an SQL identifier below, the key is bound.
    private let readSQL: String

    /// The table name, checked to be an SQL identifier (optionally schema-qualified), so it can
    /// be written into statements.
    init(table: String) {
        let identifier = #/[A-Za-z_][A-Za-z0-9_$]{0,62}/#
        let valid = table.split(separator: ".", omittingEmptySubsequences: false).count <= 2
            && table.split(separator: ".", omittingEmptySubsequences: false)
                .allSatisfy { $0.wholeMatch(of: identifier) != nil }
        precondition(valid, "tableName: \(String(reflecting: table)) is not an SQL identifier ([A-Za-z_][A-Za-z0-9_$]*, optionally schema.table)")
        self.table = table
        self.readSQL = """
            SELECT generation, value, result_expires_at > now(), claim_expires_at > now()
            FROM \(table) WHERE key_hash = $1
            """
    }

    /// Microseconds, for `$n::float8 * interval '1 microsecond'`.
    static func microseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000_000 + Double(attoseconds) / 1_000_000_000_000
    }

    var create: PostgresQuery {
        """
        CREATE TABLE IF NOT EXISTS \(unescaped: table) (
            key_hash text PRIMARY KEY,
            key_prefix bytea NOT NULL,
            claim_token uuid,
            claim_expires_at timestamptz,
            generation bigint NOT NULL DEFAULT 0,
            value bytea,
            stored_at timestamptz,
            result_expires_at timestamptz
        )
        """
    }

    /// One row: `generation`, `value`, whether the value is fresh, whether a claim is live (the
    /// last two `NULL` for false). Compared with `now()`, the statement's start (it is a
    /// transaction of its own), and without `coalesce`: a plain `SELECT` of the value costs about
    /// 6% less than this read on loopback, where the same four columns through `coalesce` and
    /// `clock_timestamp()` cost 8% (Benchmarks/NOTES.md, 2026-11-30).
    func read(_ key: KeyDigest) -> PostgresQuery {
        var binds = PostgresBindings(capacity: 1)
        binds.append(key.hex)
        return PostgresQuery(unsafeSQL: readSQL, binds: binds)
    }

    /// Takes the claim when there is no live claim, the row is still at `generation` (nothing
    /// stored or invalidated since the caller read it), and its value is not fresh (or is fresh
    /// but does not decode: `replacingUndecodable`). Returns one row when the claim was taken.
    func claim(
        _ key: KeyDigest, token: UUID, lease: Duration, generation: Int64, replacingUndecodable: Bool
    ) -> PostgresQuery {
        """
        INSERT INTO \(unescaped: table) AS t (key_hash, key_prefix, claim_token, claim_expires_at)
        VALUES (\(key.hex), \(ByteBuffer(bytes: key.prefix)), \(token),
                clock_timestamp() + \(Self.microseconds(lease))::float8 * interval '1 microsecond')
        ON CONFLICT (key_hash) DO UPDATE
        SET claim_token = excluded.claim_token, claim_expires_at = excluded.claim_expires_at
        WHERE (t.claim_token IS NULL OR t.claim_expires_at <= clock_timestamp())
          AND t.generation = \(generation)
          AND (t.value IS NULL OR t.result_expires_at <= clock_timestamp() OR \(replacingUndecodable))
        RETURNING 1
        """
    }

    /// Extends a claim the caller still holds by a lease. Returns one row when it was held.
    func heartbeat(_ key: KeyDigest, token: UUID, lease: Duration) -> PostgresQuery {
        """
        UPDATE \(unescaped: table)
        SET claim_expires_at = clock_timestamp() + \(Self.microseconds(lease))::float8 * interval '1 microsecond'
        WHERE key_hash = \(key.hex) AND claim_token = \(token)
        RETURNING 1
        """
    }

    /// Stores a result and releases the claim, when the caller still holds it. Returns one row
    /// when it was held. A result with no `expireAfter` expires at `'infinity'` (never).
    func store(_ key: KeyDigest, token: UUID, value: Data, expireAfter: Duration?) -> PostgresQuery {
        """
        UPDATE \(unescaped: table)
        SET value = \(ByteBuffer(bytes: value)), stored_at = clock_timestamp(),
            result_expires_at = coalesce(
                clock_timestamp() + \(expireAfter.map(Self.microseconds))::float8 * interval '1 microsecond',
                'infinity'),
            generation = generation + 1, claim_token = NULL, claim_expires_at = NULL
        WHERE key_hash = \(key.hex) AND claim_token = \(token)
        RETURNING 1
        """
    }

    /// Releases the claim without storing, when the caller still holds it.
    func release(_ key: KeyDigest, token: UUID) -> PostgresQuery {
        """
        UPDATE \(unescaped: table) SET claim_token = NULL, claim_expires_at = NULL
        WHERE key_hash = \(key.hex) AND claim_token = \(token)
        """
    }

    /// Drops the stored result (a claim in progress is left alone).
    func invalidate(_ key: KeyDigest) -> PostgresQuery {
        """
        UPDATE \(unescaped: table)
        SET value = NULL, stored_at = NULL, result_expires_at = NULL, generation = generation + 1
        WHERE key_hash = \(key.hex)
        """
    }
}

#endif
