#if PostgreSQL
import Crypto
import Foundation
import NIOCore
import PostgresNIO

/// The SQL of ``PostgresFleetCache`` beyond ``SingleFlightStatements`` (whose table holds the
/// shared tier): the tag table, and the invalidations, each one autocommit statement that
/// changes the shared tier *and* notifies the fleet (`pg_notify` is transactional: the
/// notification is delivered when, and only if, the change commits).
///
/// An invalidation clears the key's value and its claim, and increments its generation: a load
/// in progress elsewhere can then not store its result (it was loaded before the invalidation),
/// and the next caller claims and loads again.
///
/// Each invalidation is also written to the log `<table>_log` (`id` from a sequence, `payload`
/// as notified, `created_at`), which instances in polling mode read, and which is pruned.
///
/// The tag table `<table>_tags`, one row per (tag, key) pair: `tag_hash` and `key_hash`, the
/// SHA-256 of the tag and of the key (``KeyDigest``). A key's rows are written before it is loaded,
/// so every stored value's tags are in the table.
struct FleetCacheStatements: Sendable {
    let values: SingleFlightStatements
    let tags: String
    let log: String
    let channel: String

    /// The statements on `table` (checked by ``SingleFlightStatements``; at most 57 characters,
    /// so that `<table>_tags` is an identifier too).
    init(table: String) {
        values = SingleFlightStatements(table: table)
        precondition(table.utf8.count <= 57, "tableName: \(String(reflecting: table)) is longer than 57 characters")
        tags = table + "_tags"
        log = table + "_log"
        // A channel name is an identifier of at most 63 bytes: derived from the table's digest,
        // so two tables never share a channel.
        channel = "taskkit_fleet_" + KeyDigest(table).hex.prefix(32)
    }

    var table: String { values.table }

    var createTags: PostgresQuery {
        """
        CREATE TABLE IF NOT EXISTS \(unescaped: tags) (
            tag_hash text NOT NULL,
            key_hash text NOT NULL,
            PRIMARY KEY (tag_hash, key_hash)
        )
        """
    }

    var createLog: PostgresQuery {
        """
        CREATE TABLE IF NOT EXISTS \(unescaped: log) (
            id bigserial PRIMARY KEY,
            payload text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )
        """
    }

    /// The highest id in the log (0 when it is empty).
    var logHead: PostgresQuery {
        "SELECT coalesce(max(id), 0)::int8 FROM \(unescaped: log)"
    }

    /// The log's rows after `id`, in order: `id`, `payload`, and whether the row was written
    /// more than `settle` ago (an invalidation taking an id from the sequence commits within
    /// `settle`, so no row with a smaller id can appear later).
    func log(after id: Int64, settle: Duration) -> PostgresQuery {
        """
        SELECT id, payload,
               created_at < clock_timestamp() - \(SingleFlightStatements.microseconds(settle))::float8 * interval '1 microsecond'
        FROM \(unescaped: log) WHERE id > \(id) ORDER BY id
        """
    }

    /// Deletes the log's rows older than `retention`.
    func pruneLog(retention: Duration) -> PostgresQuery {
        """
        DELETE FROM \(unescaped: log)
        WHERE created_at < clock_timestamp() - \(SingleFlightStatements.microseconds(retention))::float8 * interval '1 microsecond'
        """
    }

    /// Records `tagHashes` as tags of `keyHash` (idempotent).
    func tag(_ keyHash: String, with tagHashes: [String]) -> PostgresQuery {
        """
        INSERT INTO \(unescaped: tags) (tag_hash, key_hash)
        SELECT tag, \(keyHash) FROM unnest(\(tagHashes)::text[]) AS tag
        ON CONFLICT DO NOTHING
        """
    }

    /// What an invalidation sets on a row.
    private static let cleared = """
        value = NULL, stored_at = NULL, result_expires_at = NULL,
        claim_token = NULL, claim_expires_at = NULL, generation = generation + 1
        """

    /// Clears the rows of `keyHashes` and sends each of `payloads`.
    func invalidate(keyHashes: [String], payloads: [String]) -> PostgresQuery {
        """
        WITH cleared AS (
            UPDATE \(unescaped: table) SET \(unescaped: Self.cleared)
            WHERE key_hash = ANY(\(keyHashes)::text[])
        ), logged AS (
            INSERT INTO \(unescaped: log) (payload) SELECT unnest(\(payloads)::text[])
        )
        SELECT count(pg_notify(\(channel), payload)) FROM unnest(\(payloads)::text[]) AS payload
        """
    }

    /// Stores `value` as the key's result (as a load's store would, taking over any claim) and
    /// sends `payload`.
    func put(
        _ key: KeyDigest, value: Data, expireAfter: Duration?, payload: String
    ) -> PostgresQuery {
        """
        WITH stored AS (
            INSERT INTO \(unescaped: table) AS t
                (key_hash, key_prefix, value, stored_at, result_expires_at, generation)
            VALUES (\(key.hex), \(ByteBuffer(bytes: key.prefix)), \(ByteBuffer(bytes: value)), clock_timestamp(),
                    coalesce(clock_timestamp()
                        + \(expireAfter.map(SingleFlightStatements.microseconds))::float8 * interval '1 microsecond',
                        'infinity'),
                    1)
            ON CONFLICT (key_hash) DO UPDATE
            SET value = excluded.value, stored_at = excluded.stored_at,
                result_expires_at = excluded.result_expires_at,
                claim_token = NULL, claim_expires_at = NULL, generation = t.generation + 1
        ), logged AS (
            INSERT INTO \(unescaped: log) (payload) VALUES (\(payload))
        )
        SELECT pg_notify(\(channel), \(payload))
        """
    }

    /// Clears the rows of every key tagged `tagHash`, forgets those tags, and notifies the keys in
    /// payloads of at most `keysPerPayload` keys, each starting with `prefix`. Returns the keys'
    /// hashes (one row each).
    func invalidate(tagHash: String, prefix: String, keysPerPayload: Int) -> PostgresQuery {
        """
        WITH tagged AS (
            DELETE FROM \(unescaped: tags) WHERE tag_hash = \(tagHash) RETURNING key_hash
        ), cleared AS (
            UPDATE \(unescaped: table) SET \(unescaped: Self.cleared)
            WHERE key_hash IN (SELECT key_hash FROM tagged)
        ), payloads AS (
            SELECT \(prefix)::text || string_agg(' k' || key_hash, '') AS payload
            FROM (SELECT key_hash, (row_number() OVER ()) / \(keysPerPayload) AS chunk FROM tagged) AS numbered
            GROUP BY chunk
        ), logged AS (
            INSERT INTO \(unescaped: log) (payload) SELECT payload FROM payloads
        ), notified AS (
            SELECT pg_notify(\(channel), payload) FROM payloads
        )
        SELECT key_hash, (SELECT count(*) FROM notified) FROM tagged
        """
    }

    /// Clears every row, forgets every tag, and sends `payload`.
    func invalidateAll(payload: String) -> PostgresQuery {
        """
        WITH cleared AS (
            UPDATE \(unescaped: table) SET \(unescaped: Self.cleared)
            WHERE value IS NOT NULL OR claim_token IS NOT NULL
        ), forgotten AS (
            DELETE FROM \(unescaped: tags)
        ), logged AS (
            INSERT INTO \(unescaped: log) (payload) VALUES (\(payload))
        )
        SELECT pg_notify(\(channel), \(payload))
        """
    }
}

#endif
