// What the README's samples use but do not declare.
// MARK: samples 1, 2
struct Profile: Sendable {}

struct API: Sendable {
    func search(_ text: String) async throws -> [String] { [text] }
    func fetchProfile() async throws -> Profile { Profile() }
}

let api = API()
// MARK: samples 3
func profileURL(of id: String) -> URL { URL(string: "https://api.example.com/profile?user=\(id)")! }
