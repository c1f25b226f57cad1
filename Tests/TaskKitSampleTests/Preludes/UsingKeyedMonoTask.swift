// What the samples of UsingKeyedMonoTask.md use but do not declare.
import TaskKit
// MARK: samples 2
func fetchToken(for service: String) async throws -> AccessToken {
    AccessToken(value: "token for \(service)", expiresIn: .seconds(3600))
}
// MARK: samples 3, 6
struct Product: Sendable {
    var id: Int
}

struct Catalog: Sendable {
    func product(_ id: Int) async throws -> Product { Product(id: id) }
}

let catalog = Catalog()
// MARK: samples 7
final class TenantConnection: Sendable {
    static func open(for tenant: String) async throws -> TenantConnection { TenantConnection() }
    func close() {}
}
// MARK: samples 4
struct Pricing: Sendable {
    func quote(for symbol: String) async throws -> Double { 42 }
}

let pricing = Pricing()
// MARK: samples 5
struct Order: Sendable {
    var id: Int
    var user: Int
}

struct Database: Sendable {
    func order(_ id: Int, of user: Int) async throws -> Order { Order(id: id, user: user) }
}

let database = Database()

extension Database {
    func order(_ id: Int) async throws -> Order { Order(id: id, user: 1) }
}
