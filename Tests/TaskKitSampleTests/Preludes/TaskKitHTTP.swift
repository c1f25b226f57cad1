// What the sample of the TaskKitHTTP catalog uses but does not declare.
import TaskKit
import TaskKitHTTP

let saved = BearerCredential(accessToken: "saved", expiresIn: .seconds(3600))
let profileURL = URL(string: "https://api.example.com/profile")!

func fetchNewToken(through transport: any HTTPTransport) async throws -> BearerCredential {
    BearerCredential(accessToken: "new", expiresIn: .seconds(3600))
}
