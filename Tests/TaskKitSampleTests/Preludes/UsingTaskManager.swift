// What the samples of UsingTaskManager.md use but do not declare.
// MARK: samples 2, 3
let imageBytes: [UInt8] = Array(repeating: 0, count: 64)
// MARK: samples 4
func send(_ name: String) {}
