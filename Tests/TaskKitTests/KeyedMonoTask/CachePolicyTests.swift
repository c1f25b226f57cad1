import Synchronization
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// The cache policies of `KeyedMonoTask` and `MonoTask` on the real components, driven by a
/// `ManualClock`: the same policy, by the same name, in both.
@Suite(.scaledTimeLimit(minutes: 1))
struct CachePolicyTests {
    /// A token whose lifetime the server decides, as an OAuth token's `expires_in`.
    struct Token: Sendable, Equatable {
        var value: String
        var expiresIn: Duration
    }

    // MARK: Expiry from the value

    @Test func keyedMonoTaskKeepsEachValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let loads = Mutex(0)
        let tokens = KeyedMonoTask<String, Token>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(60),
            clock: clock,
            expiry: { _, token in token.expiresIn }
        ) { scope in
            let count = loads.withLock { $0 += 1; return $0 }
            return Token(value: "\(scope)-\(count)", expiresIn: scope == "short" ? .seconds(5) : .seconds(3600))
        }
        let short = try await tokens.value(for: "short")
        let long = try await tokens.value(for: "long")
        clock.advance(by: .seconds(4))
        #expect(try await tokens.value(for: "short") == short)  // within its own 5 s
        clock.advance(by: .seconds(1))
        #expect(tokens.cachedValue(for: "short") == nil)  // 5 s: expired, although the default is 60 s
        #expect(try await tokens.value(for: "short") != short)
        clock.advance(by: .seconds(120))  // past the default 60 s, within its own hour
        #expect(try await tokens.value(for: "long") == long)
        #expect(loads.withLock { $0 } == 3)
    }

    @Test func keyedMonoTaskWithABatchLoaderKeepsEachValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let batches = Mutex(0)
        let cache = KeyedMonoTask<Int, Token>(
            maximumEntries: 100,
            maximumBatchSize: 10,
            clock: clock,
            expiry: { _, token in token.expiresIn }
        ) { keys in
            batches.withLock { $0 += 1 }
            // Even keys live 10 s; odd ones a negative time: delivered, not kept.
            return Dictionary(uniqueKeysWithValues: keys.map { key in
                (key, Token(value: "\(key)", expiresIn: key.isMultiple(of: 2) ? .seconds(10) : .seconds(-1)))
            })
        }
        let first = await cache.values(for: [1, 2])
        #expect(try first[2]?.get() == Token(value: "2", expiresIn: .seconds(10)))
        #expect(batches.withLock { $0 } == 1)
        clock.advance(by: .seconds(9))
        #expect(cache.cachedValue(for: 2) != nil)
        #expect(cache.cachedValue(for: 1) == nil)
        clock.advance(by: .seconds(1))
        #expect(cache.cachedValue(for: 2) == nil)
    }

    @Test func monoTaskKeepsTheValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let lifetimes = Mutex([Duration.seconds(30), .seconds(3600)])
        let token = MonoTask<Token>(clock: clock, expiry: { $0.expiresIn }) {
            .success(Token(value: "token", expiresIn: lifetimes.withLock { $0.removeFirst() }))
        }
        // The default time to live is zero (nothing cached); the token's own 30 s keeps it.
        let first = try await token.executeThrows()
        #expect(first.expiresIn == .seconds(30))
        clock.advance(by: .seconds(29))
        #expect(token.currentResult == first)
        clock.advance(by: .seconds(1))
        #expect(token.currentResult == nil)
        let second = try await token.executeThrows()
        #expect(second.expiresIn == .seconds(3600))
        clock.advance(by: .seconds(3599))
        #expect(token.currentResult == second)
    }
}
