import Testing
@testable import TaskKit
import TaskKitTestSupport

/// The entry table's hash table at sizes and collision rates the model test (64 keys) does not
/// reach: growth, long probe runs, backward-shift deletion across the end of the bucket array.
@Suite struct KeyedMonoTaskEntryTableTests {
    /// A key whose hash is one of four values: every key collides with a quarter of the others.
    struct CollidingKey: Hashable {
        var id: Int
        func hash(into hasher: inout Hasher) { hasher.combine(id % 4) }
    }

    static func check<Key>(_ table: KeyedMonoTaskEntryTable<Key, String>, model: [Key: String], absent: [Key]) {
        #expect(table.count == model.count)
        #expect(table.index.count == model.count)
        for (key, value) in model {
            let slot = table.find(key)
            #expect(slot.map { table[$0].key } == key)
            #expect(slot.flatMap { table[$0].value } == value)
            #expect(slot.map { table.bucket(of: $0) } == table.findBucket(key))
        }
        for key in absent { #expect(table.find(key) == nil) }
        for slot in 0..<Int32(table.count) { #expect(table[slot].slot == slot) }
        #expect(table.queueOrder.count == table.count)
    }

    static func run<Key: Hashable>(keys: Int, steps: Int, makeKey: (Int) -> Key) {
        var generator = SeededRandomNumberGenerator(seed: 7)
        var table = KeyedMonoTaskEntryTable<Key, String>()
        var model: [Key: String] = [:]
        for step in 0..<steps {
            let id = Int(generator.next() % UInt64(keys))
            let key = makeKey(id)
            if let slot = table.find(key) {
                #expect(model[key] != nil)
                if generator.next() % 3 == 0 {
                    table.markRead(slot)
                } else {
                    #expect(table.remove(slot).node.key == key)
                    model[key] = nil
                }
            } else {
                #expect(model[key] == nil)
                let slot = table.insertLoading(key, generation: UInt64(step + 1))
                table[slot].value = "\(id)"
                table.endLoad(slot)
                model[key] = "\(id)"
            }
            if step % 1_000 == 0 { check(table, model: model, absent: (0..<8).map { makeKey(keys + $0) }) }
        }
        check(table, model: model, absent: (0..<8).map { makeKey(keys + $0) })
        while let evicted = table.evict(keepingHead: false) { model[evicted.node.key] = nil }
        #expect(model.isEmpty && table.count == 0)
    }

    @Test func manyKeysMatchAModel() {
        Self.run(keys: 5_000, steps: 40_000) { $0 }
    }

    @Test func collidingKeysMatchAModel() {
        Self.run(keys: 300, steps: 6_000) { CollidingKey(id: $0) }
    }
}
