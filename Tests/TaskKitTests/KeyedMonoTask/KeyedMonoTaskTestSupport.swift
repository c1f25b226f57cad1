import Foundation
import Testing
import TaskKitTestSupport


@testable import TaskKit

// Helpers for the KeyedMonoTask suites (prefixed `Keyed`: the test module is shared).

/// Records the loads of a `KeyedMonoTask<Int, String>`: how many started per key, how many run
/// at once per key (and the most ever seen), and holds each load at a per-key gate until the
/// test opens it (keys without a gate run straight through). Each gate is a ``TestGate``: a load
/// still held after its deadline records an issue and goes on, so a broken test fails instead
/// of hanging.
final class KeyedLoadRecorder: Sendable {
    private struct State {
        var started: [Int: Int] = [:]
        var active: [Int: Int] = [:]
        var maximumOverlap = 0
        /// The closed gate of each gated key.
        var gates: [Int: TestGate] = [:]
        var failing: Set<Int> = []
    }

    private let state = LockedState(State())

    /// Holds the loads of `keys` at their gate until ``open(_:)``.
    init(gated keys: Set<Int> = []) {
        state.withLock { state in
            for key in keys { state.gates[key] = TestGate() }
        }
    }

    /// Makes later loads of `key` fail (or succeed again) with `KeyedTestError(key:attempt:)`.
    func setFailing(_ key: Int, _ failing: Bool = true) {
        state.withLock { state in
            if failing { state.failing.insert(key) } else { state.failing.remove(key) }
        }
    }

    /// Closes the gate of `key` for later loads.
    func close(_ key: Int) {
        state.withLock { state in
            if state.gates[key] == nil { state.gates[key] = TestGate() }
        }
    }

    /// Opens the gate of `key`: loads waiting there go on, later ones do not stop.
    func open(_ key: Int) {
        state.withLock { $0.gates.removeValue(forKey: key) }?.open()
    }

    /// The load: `"<key>#<n>"` for the n-th load of the key, or a failure if the key is failing.
    func load(_ key: Int) async throws -> String {
        let (attempt, gate) = state.withLock { state -> (Int, TestGate?) in
            state.started[key, default: 0] += 1
            state.active[key, default: 0] += 1
            state.maximumOverlap = max(state.maximumOverlap, state.active[key]!)
            return (state.started[key]!, state.gates[key])
        }
        await gate?.wait()
        let fails = state.withLock { state -> Bool in
            state.active[key]! -= 1
            return state.failing.contains(key)
        }
        if fails { throw KeyedTestError(key: key, attempt: attempt) }
        return "\(key)#\(attempt)"
    }

    /// Loads started for `key` (attempts, retries included).
    func started(_ key: Int) -> Int { state.withLock { $0.started[key, default: 0] } }
    /// Loads started for all keys.
    var totalStarted: Int { state.withLock { $0.started.values.reduce(0, +) } }
    /// Loads of `key` waiting at its gate.
    func waiting(_ key: Int) -> Int { state.withLock { $0.gates[key] }?.waiting ?? 0 }
    /// The most loads of one key ever seen running at once.
    var maximumOverlap: Int { state.withLock { $0.maximumOverlap } }
}

struct KeyedTestError: Error, Equatable {
    var key: Int
    var attempt: Int
}

