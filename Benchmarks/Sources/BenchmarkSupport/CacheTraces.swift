// Request traces for cache hit ratios, and exact LRU's hit ratio on them: the reference a cache's
// eviction policy is compared with (KeyedMonoTask's SIEVE, issue 35).
import Foundation

/// SplitMix64: a fixed, portable random sequence (the same trace and order on every machine).
public struct SplitMix: RandomNumberGenerator {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

public enum CacheTrace {
    /// `requests` keys drawn from `0..<keys` with Zipf popularity of exponent `s` (the key of rank
    /// r is asked with probability proportional to 1 / r^s); ranks are shuffled over the keys.
    public static func zipf(requests: Int, keys: Int, s: Double, seed: UInt64) -> [Int] {
        var generator = SplitMix(seed: seed)
        var cumulative: [Double] = []
        cumulative.reserveCapacity(keys)
        var total = 0.0
        for rank in 1...keys {
            total += 1 / pow(Double(rank), s)
            cumulative.append(total)
        }
        let keyOfRank = Array(0..<keys).shuffled(using: &generator)
        return (0..<requests).map { _ in
            let target = Double(generator.next() >> 11) / Double(1 << 53) * total
            var low = 0
            var high = keys - 1
            while low < high {
                let middle = (low + high) / 2
                if cumulative[middle] < target { low = middle + 1 } else { high = middle }
            }
            return keyOfRank[low]
        }
    }

    /// A hot set of `hot` keys asked uniformly, with every fourth request a key of a one-pass scan
    /// (each scanned key asked once, never again).
    public static func hotSetWithScan(requests: Int, hot: Int, seed: UInt64) -> [Int] {
        var generator = SplitMix(seed: seed)
        return (0..<requests).map { index in
            index % 4 == 3 ? hot + index : Int(generator.next() % UInt64(hot))
        }
    }

    /// The hits exact least-recently-used eviction with room for `capacity` keys makes on `trace`.
    public static func lruHits(_ trace: [Int], capacity: Int) -> Int {
        var slotOf: [Int: Int] = [:]
        var keys: [Int] = []
        var newer: [Int] = []
        var older: [Int] = []
        var head = -1  // most recently used
        var tail = -1  // least recently used
        var hits = 0
        func unlink(_ slot: Int) {
            if newer[slot] == -1 { head = older[slot] } else { older[newer[slot]] = older[slot] }
            if older[slot] == -1 { tail = newer[slot] } else { newer[older[slot]] = newer[slot] }
        }
        func linkAtHead(_ slot: Int) {
            newer[slot] = -1
            older[slot] = head
            if head == -1 { tail = slot } else { newer[head] = slot }
            head = slot
        }
        for key in trace {
            if let slot = slotOf[key] {
                hits += 1
                unlink(slot)
                linkAtHead(slot)
                continue
            }
            let slot: Int
            if keys.count < capacity {
                slot = keys.count
                keys.append(key)
                newer.append(-1)
                older.append(-1)
            } else {
                slot = tail
                unlink(slot)
                slotOf[keys[slot]] = nil
                keys[slot] = key
            }
            slotOf[key] = slot
            linkAtHead(slot)
        }
        return hits
    }
}
