// What the samples of UsingCoFuture.md use but do not declare.
// MARK: samples 2, 3
struct Profile: Decodable {
    var avatar: URL
}

let session = URLSession.shared
let profileRequest = URLRequest(url: URL(string: "https://api.example.com/profile")!)

func avatarRequest(for profile: Profile) -> URLRequest { URLRequest(url: profile.avatar) }
// MARK: samples 4
struct Image: Sendable {}

struct API: Sendable {
    func profile() async throws -> String { "profile" }
}

let api = API()
let image = Image()

func render(_ image: Image) throws -> Data { Data() }
