// What the samples of RunningOnAServer.md use but do not declare.
// MARK: samples 1
struct API: Sendable {
    func fetchProfile(_ id: Int) async throws -> String { "profile \(id)" }
}

let api = API()
// MARK: samples 3
import InMemoryTracing

struct Profile: Sendable {}

struct API: Sendable {
    func fetchProfile() async throws -> Profile { Profile() }
}

let api = API()
let tracer = InMemoryTracer()
let ordersURL = URL(string: "https://orders.example.com/orders")!
// MARK: samples 4
import Logging

struct HTTPServer: Service {
    func run() async throws {}
}

let httpServer = HTTPServer()
let logger = Logger(label: "server")
