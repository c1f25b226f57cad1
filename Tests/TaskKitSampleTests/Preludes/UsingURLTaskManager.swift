// What the samples of UsingURLTaskManager.md use but do not declare.
import TaskKit
import TaskKitHTTP
// MARK: samples 1, 2
let url = URL(string: "https://api.example.com/profile")!
// MARK: samples 2
let request = URLRequest(url: url)
// MARK: samples 4, 5, 8
let savedToken = "saved"
let tokenURL = URL(string: "https://auth.example.com/token")!
// MARK: samples 6, 9
let authenticator = BearerTokenAuthenticator(credential: nil) { _, _ in
    BearerCredential(accessToken: "new", expiresIn: .seconds(3600))
}
// MARK: samples 6
let transport = URLSessionTransport()
let visibleUsers = ["ada", "grace", "ada"]

func avatarURL(of user: String) -> URL { URL(string: "https://cdn.example.com/avatar/\(user)")! }
// MARK: samples 7
import AsyncHTTPClient
import TaskKitAsyncHTTPClient

struct Request {
    var tenant: String
    var remainingBudget: Duration
}

struct Response {
    var body: Data
}

let client = HTTPClient.shared
let catalogURL = URL(string: "https://catalog.example.com/items")!
let serviceAuthenticator = BearerTokenAuthenticator(credential: nil) { _, _ in
    BearerCredential(accessToken: "service", expiresIn: .seconds(3600))
}
// MARK: samples 8
func profileURL(of user: String) -> URL { URL(string: "https://api.example.com/profile?user=\(user)")! }
// MARK: samples 9
let profileURL = URL(string: "https://api.example.com/profile")!
