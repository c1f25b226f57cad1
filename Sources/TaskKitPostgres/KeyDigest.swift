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
    /// The key itself, for ``prefix``.
    private let key: String

    /// How many of the key's UTF-8 bytes the `key_prefix` column keeps.
    static let prefixLength = 200

    /// The hex digits, made once.
    private static let digits = Array("0123456789abcdef".utf8)

    init(_ key: String) {
        var key = key
        // The buffer `withUTF8` lends is read only inside its closure.
        let digest = key.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        // Written in place, one allocation (the string's): the closure writes exactly the 64
        // bytes asked for, at indices 0..<64 (two per digest byte, 32 bytes), and says so.
        self.hex = String(unsafeUninitializedCapacity: 64) { hex in
            var index = 0
            for byte in digest {
                hex[index] = Self.digits[Int(byte >> 4)]
                hex[index + 1] = Self.digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
        self.key = key
    }

    /// The key's first bytes (at most ``prefixLength``), kept in a column for people reading the
    /// table; `bytea`, so any content is safe. Made when a statement needs it (a claim), not for
    /// every read.
    var prefix: Data { Data(key.utf8.prefix(Self.prefixLength)) }

    static func == (lhs: KeyDigest, rhs: KeyDigest) -> Bool { lhs.hex == rhs.hex }

    func hash(into hasher: inout Hasher) { hasher.combine(hex) }
}

#endif
