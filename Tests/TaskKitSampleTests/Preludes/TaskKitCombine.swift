// What the samples of the TaskKitCombine catalog use but do not declare.
import Combine
// MARK: samples 1
struct User: Sendable {
    var name: String
}

func fetchUser(id: Int) -> CoFuture<User> { CoFuture(result: .success(User(name: "Ada"))) }
// MARK: samples 2
var namesPublisher: Just<String> { Just("Ada") }
