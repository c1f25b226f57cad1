#if PostgreSQL
/// The payload of a ``PostgresFleetCache`` notification: the sending instance's origin, then
/// what to drop, space-separated: `k<64 hex digits>` for a key (its ``KeyDigest``), `a` for
/// everything. Keys travel as digests, so a payload's size does not depend on the keys: at most
/// ``keysPerPayload`` of them, well under PostgreSQL's 8,000-byte limit.
struct FleetInvalidationMessage: Sendable, Equatable {
    /// What a message drops.
    enum Target: Sendable, Equatable {
        case keys([String])
        case all
    }

    let origin: String
    let target: Target

    /// The most keys one payload carries: 100 × 66 bytes, plus the origin, is under 6,700 bytes.
    static let keysPerPayload = 100

    init(origin: String, target: Target) {
        self.origin = origin
        self.target = target
    }

    /// The payloads for `keyHashes` from `origin`: one per ``keysPerPayload`` keys.
    static func payloads(origin: String, keyHashes: [String]) -> [String] {
        stride(from: 0, to: keyHashes.count, by: keysPerPayload).map { start in
            let chunk = keyHashes[start..<min(start + keysPerPayload, keyHashes.count)]
            return origin + chunk.map { " k" + $0 }.joined()
        }
    }

    /// The payload that drops everything.
    static func allPayload(origin: String) -> String { origin + " a" }

    /// The message in `payload`, or `nil` when it is not one (another sender on the channel).
    init?(payload: String) {
        let parts = payload.split(separator: " ")
        guard let origin = parts.first, parts.count > 1 else { return nil }
        self.origin = String(origin)
        if parts.dropFirst().contains("a") {
            target = .all
            return
        }
        var keys: [String] = []
        keys.reserveCapacity(parts.count - 1)
        for part in parts.dropFirst() {
            guard part.first == "k", part.utf8.count == 65 else { return nil }
            keys.append(String(part.dropFirst()))
        }
        target = .keys(keys)
    }
}

#endif
