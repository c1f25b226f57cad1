import Foundation
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// SIEVE keeps at least as many hits as exact LRU where LRU is the usual yardstick: skewed (Zipf)
/// traffic, and a hot set disturbed by a one-pass scan. Driven through the state machines of a
/// 10,000-entry cache's shards (as `KeyedMonoTask` splits it), with loads finishing at once; the
/// release-build figures on the issue's full traces are in `KeyedMonoTaskBenchmarks`.
@Suite struct KeyedMonoTaskHitRatioTests {
    typealias Machine = KeyedMonoTaskStateMachine<Int, Int, Int>

    /// Hits of a `KeyedMonoTask` of `capacity` entries (its shards, values kept forever) on `trace`.
    static func keyedHits(_ trace: [Int], capacity: Int) -> Int {
        let occupancy = KeyedMonoTaskOccupancy()
        let configuration = Machine.Configuration(maximumEntries: capacity, timeToLive: nil, staleWhileRevalidate: .zero, retry: .never)
        var shards = (0..<KeyedMonoTask<Int, Int>.shardCount(maximumEntries: capacity)).map { _ in
            Machine(configuration: configuration, occupancy: occupancy)
        }
        for key in trace {
            let index = KeyedMonoTask<Int, Int>.shardIndex(hashValue: key.hashValue, mask: shards.count - 1)
            switch shards[index].fastPath(key: key, hashValue: key.hashValue, forceUpdate: false, now: .zero) {
            case .hit: break
            case .miss(let id):
                guard case .enqueued(let start?, _, _) = shards[index].request(key: key, hashValue: key.hashValue, waiter: 0, id: id, forceUpdate: false, now: .zero)
                else { Issue.record("a miss starts a load"); return 0 }
                _ = shards[index].attemptFinished(generation: start.generation, result: .success(key), now: .zero)
            }
        }
        #expect(occupancy.entryCount == capacity && shards.reduce(0) { $0 + $1.count } == capacity)
        return shards.reduce(0) { $0 + $1.counters.hits }
    }

    /// Exact least-recently-used eviction's hits with room for `capacity` keys.
    static func lruHits(_ trace: [Int], capacity: Int) -> Int {
        var lastUse: [Int: Int] = [:]  // key -> time of its last request
        var byTime: [Int: Int] = [:]  // time -> key, for the keys held
        var oldest = 0
        var hits = 0
        for (time, key) in trace.enumerated() {
            if let previous = lastUse[key] {
                hits += 1
                byTime[previous] = nil
            } else if lastUse.count == capacity {
                while byTime[oldest] == nil { oldest += 1 }
                lastUse[byTime.removeValue(forKey: oldest)!] = nil
            }
            lastUse[key] = time
            byTime[time] = key
        }
        return hits
    }

    /// Keys of `0..<keys` with Zipf popularity (exponent `s`), ranks shuffled over the keys.
    static func zipf(requests: Int, keys: Int, s: Double, seed: UInt64) -> [Int] {
        var generator = SeededRandomNumberGenerator(seed: seed)
        var cumulative = [Double](repeating: 0, count: keys)
        var total = 0.0
        for rank in 0..<keys {
            total += pow(Double(rank + 1), -s)
            cumulative[rank] = total
        }
        let keyOfRank = Array(0..<keys).shuffled(using: &generator)
        return (0..<requests).map { _ in
            let target = Double.random(in: 0..<total, using: &generator)
            let rank = cumulative.partitioningIndex { $0 > target }
            return keyOfRank[Swift.min(rank, keys - 1)]
        }
    }

    @Test(arguments: [0.8, 1.0])
    func onZipfTracesSieveHitsAtLeastAsOftenAsExactLRU(s: Double) {
        let trace = Self.zipf(requests: 300_000, keys: 100_000, s: s, seed: 35)
        let keyed = Self.keyedHits(trace, capacity: 10_000)
        let lru = Self.lruHits(trace, capacity: 10_000)
        #expect(keyed >= lru, "Zipf s=\(s): KeyedMonoTask \(keyed) hits, exact LRU \(lru), of \(trace.count)")
    }

    @Test func aOnePassScanDoesNotFlushTheHotSet() {
        var generator = SeededRandomNumberGenerator(seed: 36)
        let trace = (0..<300_000).map { index in
            index % 4 == 3 ? 8_000 + index : Int(generator.next() % 8_000)
        }
        let keyed = Self.keyedHits(trace, capacity: 10_000)
        let lru = Self.lruHits(trace, capacity: 10_000)
        #expect(keyed >= lru, "hot set + scan: KeyedMonoTask \(keyed) hits, exact LRU \(lru), of \(trace.count)")
    }
}

extension Array {
    /// The first index whose element satisfies `belongs`, which holds for a suffix (binary search).
    fileprivate func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
