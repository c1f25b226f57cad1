import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TaskKit

// The worked examples of MonoTask.md, kept compiling here (the network ones are compiled, not run).
enum MonoTaskArticleExamples {
    struct BadStatus: Error { var code: Int }

    static let url = URL(string: "http://127.0.0.1:8080/greeting")!

    static let greeting = MonoTask<String>(resultExpireDuration: .seconds(60)) { callback in
        URLSession.shared.dataTask(with: url) { data, response, error in
            if let error {
                callback(.failure(error))
            } else if let http = response as? HTTPURLResponse, http.statusCode != 200 {
                callback(.failure(BadStatus(code: http.statusCode)))
            } else {
                callback(.success(String(decoding: data ?? Data(), as: UTF8.self)))
            }
        }.resume()
    }

    static func showGreeting() async {
        async let a = greeting.asyncExecute()
        async let b = greeting.asyncExecute()
        async let c = greeting.asyncExecute()
        _ = await (a, b, c)
        let cached = greeting.currentResult
        _ = cached
    }

    static let report = MonoTask<Data>(
        retry: .count(
            count: 3,
            intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2)
                .capped(at: .seconds(10))
                .jittered(.full)
        ),
        resultExpireDuration: .seconds(300)
    ) {
        do {
            let (data, _) = try await URLSession.shared.data(from: url)
            return .success(data)
        } catch {
            return .failure(error)
        }
    }

    static func loadReport() async throws -> Data {
        try await report.executeThrows()
    }

    static let clock = ContinuousClock()
    static let settings = MonoTask<[String: String]>(
        resultExpireDuration: nil,
        refreshAhead: .age(.seconds(600)),
        clock: clock
    ) {
        .success(["theme": "dark"])
    }

    static func userChangedSettings() {
        settings.clearResult(ongoingExecutionStrategy: .cancel, restartWhenIdle: true)
    }

    static func logout() {
        settings.clearResult(ongoingExecutionStrategy: .allowCompletion)
    }
}

@Suite struct MonoTaskArticleExampleTests {
    @Test func theCacheControlExampleWorks() async throws {
        #expect(try await MonoTaskArticleExamples.settings.executeThrows() == ["theme": "dark"])
        MonoTaskArticleExamples.userChangedSettings()
        #expect(try await MonoTaskArticleExamples.settings.executeThrows() == ["theme": "dark"])
        MonoTaskArticleExamples.logout()
        #expect(MonoTaskArticleExamples.settings.currentResult == nil)
    }
}
