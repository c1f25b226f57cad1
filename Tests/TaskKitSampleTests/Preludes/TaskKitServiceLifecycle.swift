// What the sample of the TaskKitServiceLifecycle catalog uses but does not declare.
import Logging

struct HTTPServer: Service {
    func run() async throws {}
}

let server = HTTPServer()
let logger = Logger(label: "server")
