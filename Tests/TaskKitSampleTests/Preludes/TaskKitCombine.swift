// What the samples of the TaskKitCombine catalog use but do not declare.
import Combine

struct User: Sendable {
    var name: String
}

func fetchUser(id: Int) -> CoFuture<User> { CoFuture(result: .success(User(name: "Ada"))) }

var namesPublisher: Just<String> { Just("Ada") }
