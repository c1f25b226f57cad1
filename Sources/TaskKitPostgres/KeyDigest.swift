#if PostgreSQL
import Crypto
import Foundation

/// What identifies a key in the table: the SHA-256 of its UTF-8 bytes, as 64 lowercase hex digits.
///
/// A key of any length and content fits: PostgreSQL `text` cannot hold a NUL byte and a btree
/// index entry tops out near 2,700 bytes, so the key itself is never the primary key. Swift's
/// `hashValue` differs per process, SHA-256 does not.
struct KeyDigest: Sendable, Hashable {
    /// The digest, 64 lowercase hex digits.
    let hex: String
    /// The key's first bytes (at most ``prefixLength``), kept in a column for people reading the
    /// table; `bytea`, so any content is safe.
    let prefix: Data

    /// How many of the key's UTF-8 bytes the `key_prefix` column keeps.
    static let prefixLength = 200

    init(_ key: String) {
        let digest = SHA256.hash(data: Data(key.utf8))
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8]()
        hex.reserveCapacity(64)
        for byte in digest {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        self.hex = String(decoding: hex, as: UTF8.self)
        self.prefix = Data(key.utf8.prefix(Self.prefixLength))
    }
}

#endif
