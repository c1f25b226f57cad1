import Testing
@testable import TaskKit
import TaskKitTestSupport

/// The sliding-window table behind TaskManager's state machine, against a dictionary model.
@Suite struct TaskManagerEntryTableTests {
    @Test func emptyTableHasNoEntries() {
        var table = TaskEntryTable<String>()
        #expect(table.isEmpty)
        #expect(table[1] == nil)
        #expect(table[0] == nil)
        #expect(table[-3] == nil)
        #expect(table.update(1) { $0 } == nil)
        #expect(table.remove(1) == nil)
        #expect(table.nextID == 1)
    }

    @Test func fifoUseKeepsTheWindowSmall() {
        var table = TaskEntryTable<Int>()
        for id in 1...10_000 {
            #expect(table.insert(id * 10) == id)
            if id > 3 { #expect(table.remove(id - 3) == (id - 3) * 10) }
            #expect(table.windowSize <= 4)
        }
        #expect(table.count == 3)
        #expect(table.stragglerCount == 0)
        #expect(table.isConsistent)
    }

    @Test func aLongLivedEntryBecomesAStragglerAndStaysReachable() {
        var table = TaskEntryTable<Int>()
        #expect(table.insert(-1) == 1)  // never removed: pins the front
        for id in 2...10_000 {
            #expect(table.insert(id) == id)
            table.remove(id)
            // Memory stays proportional to the live entries, not to the identifiers handed out.
            #expect(table.windowSize <= 64)
        }
        #expect(table.stragglerCount == 1)
        #expect(table[1] == -1)
        #expect(table.update(1) { value -> Int in
            value = -2
            return value
        } == -2)
        #expect(table[1] == -2)
        // Stale identifiers never reach a live entry.
        #expect(table[2] == nil)
        #expect(table[9_999] == nil)
        #expect(table.remove(2) == nil)
        #expect(table.remove(1) == -2)
        #expect(table.isEmpty)
        #expect(table.isConsistent)
        #expect(table[1] == nil)
        #expect(table.nextID == 10_001)
    }

    @Test func randomOperationsMatchADictionary() {
        for seed: UInt64 in [1, 2, 3, 42, 1234] {
            var generator = SeededRandomNumberGenerator(seed: seed)  // a failure reproduces
            var table = TaskEntryTable<Int>()
            var model: [Int: Int] = [:]
            var nextID = 1
            // Phases biased towards adding, then towards removing, so the table grows, thins
            // out with a few long-lived entries, and empties.
            for step in 0..<20_000 {
                let addBias: UInt64 = step < 10_000 ? 6 : 3
                let roll = generator.next() % 10
                if roll < addBias {
                    #expect(table.insert(nextID * 7) == nextID)
                    model[nextID] = nextID * 7
                    nextID += 1
                } else if roll < 9, nextID > 1 {
                    // Mostly recent identifiers (like tasks finishing soon), sometimes any.
                    let span = generator.next() % 2 == 0 ? min(nextID - 1, 50) : nextID - 1
                    let id = nextID - 1 - Int(generator.next() % UInt64(span))
                    #expect(table.remove(id) == model.removeValue(forKey: id))
                } else if nextID > 1 {
                    let id = 1 + Int(generator.next() % UInt64(nextID - 1))
                    let updated = table.update(id) { value -> Int in
                        value += 1
                        return value
                    }
                    if model[id] != nil { model[id]! += 1 }
                    #expect(updated == model[id])
                }
                #expect(table.count == model.count)
                #expect(table.windowSize <= max(64, 2 * table.count + 2))
            }
            #expect(table.isConsistent)
            for id in 0...nextID { #expect(table[id] == model[id]) }
            for id in model.keys.sorted() { #expect(table.remove(id) == model[id]) }
            #expect(table.isEmpty)
            #expect(table.isConsistent)
        }
    }
}
