#if Examples
import ArgumentParser
import Foundation
import TaskKitLoopbackServer

/// `swift run taskkit-demo`: every TaskKit component doing real work against an embedded
/// loopback HTTP server, with a pass/fail verdict per scenario.
@main
struct TaskKitDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "taskkit-demo",
        abstract: "Shows every TaskKit component doing real work against a local HTTP server.",
        discussion: """
            Starts an HTTP server on a free 127.0.0.1 port, runs one scenario per component \
            against it, and prints what happened with the numbers measured during the run. \
            Exits non-zero if any scenario does not behave as expected.
            Scenarios: \(Scenario.all.map(\.name).joined(separator: ", ")).
            """
    )

    @Option(name: .long, help: "Run only this scenario (repeatable). One of: \(Scenario.all.map(\.name).joined(separator: ", ")).")
    var scenario: [String] = []

    @Flag(name: .long, help: "Print machine-readable JSON instead of the table.")
    var json = false

    func validate() throws {
        let known = Set(Scenario.all.map(\.name))
        for name in scenario where !known.contains(name) {
            throw ValidationError("unknown scenario '\(name)'; known: \(known.sorted().joined(separator: ", "))")
        }
    }

    func run() async throws {
        let selected = scenario.isEmpty ? Scenario.all : Scenario.all.filter { scenario.contains($0.name) }
        let console = Console(quiet: json)
        let server = try await LoopbackServer.start()
        console.line("taskkit-demo: loopback server on \(server.baseURL.absoluteString)")

        var reports: [ScenarioReport] = []
        for scenario in selected {
            let report = await console.running(scenario.title) {
                await scenario.execute(DemoContext(server: server, console: console))
            }
            reports.append(report)
            console.show(report)
        }
        await server.stop()

        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(reports), as: UTF8.self))
        } else {
            console.summary(reports)
        }
        if reports.contains(where: { !$0.passed }) {
            throw ExitCode.failure
        }
    }
}
#endif
