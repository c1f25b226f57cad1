// What the samples of UsingTaskStore.md use but do not declare.
import Observation
import TaskKit
// MARK: samples 1
struct API: Sendable {
    func loadFirstPage() async {}
}

let api = API()
// MARK: samples 5
import TaskKitTesting
import Testing

let clock = ManualClock()
