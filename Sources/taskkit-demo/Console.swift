#if Examples
import Foundation

/// Progress lines while scenarios run, then the summary table. Writes to standard error when
/// JSON goes to standard output.
struct Console: Sendable {
    let quiet: Bool

    private var interactive: Bool { !quiet && isatty(STDOUT_FILENO) != 0 }

    func line(_ text: String) {
        if quiet {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }

    /// Runs `work` with a progress line: a ticking timer on a terminal, a start line otherwise.
    func running<T: Sendable>(_ title: String, _ work: @Sendable () async -> T) async -> T {
        guard interactive else {
            line("… \(title)")
            return await work()
        }
        let start = ContinuousClock.now
        let ticker = Task {
            while !Task.isCancelled {
                let elapsed = start.duration(to: .now).seconds
                print(String(format: "\r… %@ (%.1f s)", title, elapsed), terminator: "")
                fflush(nil)
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        let result = await work()
        ticker.cancel()
        _ = await ticker.result
        print("\r\u{1B}[2K", terminator: "")
        return result
    }

    func show(_ report: ScenarioReport) {
        line("\(report.passed ? "✔" : "✘") \(report.title) — \(String(format: "%.2f s", report.seconds))")
        for measurement in report.measurements {
            line("    \(measurement.what): \(measurement.value)")
        }
        for check in report.checks {
            let mark = check.passed ? "ok  " : "FAIL"
            line("    [\(mark)] \(check.what): \(check.actual)\(check.passed ? "" : " (expected \(check.expected))")")
        }
    }

    /// The workloads run both ways, side by side: upstream requests (or results handled) and wall
    /// time.
    func comparisonTable(_ comparisons: [Comparison]) {
        guard !comparisons.isEmpty else { return }
        let header = ["scenario", "workload", "counted", "naive", "TaskKit", "naive time", "TaskKit time"]
        let rows = comparisons.map { comparison in
            [
                comparison.scenario, comparison.workload, comparison.counted,
                "\(comparison.naive.count)", "\(comparison.taskKit.count)",
                String(format: "%.2f s", comparison.naive.seconds), String(format: "%.2f s", comparison.taskKit.seconds),
            ]
        }
        line("")
        line("The same workloads without TaskKit (each caller sends its own requests and handles every result) and with it:")
        table(header: header, rows: rows)
    }

    private func table(header: [String], rows: [[String]]) {
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        func format(_ row: [String]) -> String {
            "| " + row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: " | ") + " |"
        }
        line(format(header))
        line("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
        rows.forEach { line(format($0)) }
    }

    func summary(_ reports: [ScenarioReport]) {
        let header = ["scenario", "result", "checks", "time"]
        let rows = reports.map { report in
            [
                report.name,
                report.passed ? "passed" : "FAILED",
                "\(report.checks.filter(\.passed).count)/\(report.checks.count)",
                String(format: "%.2f s", report.seconds),
            ]
        }
        line("")
        table(header: header, rows: rows)
        comparisonTable(reports.flatMap(\.comparisons))
        let failed = reports.filter { !$0.passed }.count
        line(failed == 0 ? "\nAll scenarios behaved as expected (\(reports.count) run)." : "\n\(failed) of \(reports.count) scenario(s) did not behave as expected.")
    }
}
#endif
