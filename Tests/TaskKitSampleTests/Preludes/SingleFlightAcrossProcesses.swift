// What the samples of SingleFlightAcrossProcesses.md use but do not declare.
import Logging
import PostgresNIO
import TaskKitPostgres
// MARK: samples 1
let secret = "secret"
// MARK: samples 2, 3, 4
let flight = PostgresSingleFlight(
    client: PostgresClient(
        configuration: .init(host: "127.0.0.1", username: "app", password: nil, database: "app", tls: .disable),
        backgroundLogger: Logger(label: "postgres")
    )
)
// MARK: samples 2, 3
struct PartnerAPI: Sendable {
    func requestToken(clientID: String, secret: String) async throws -> PartnerToken {
        PartnerToken(accessToken: "token", expiresAt: Date())
    }
}

let partnerAPI = PartnerAPI()
let clientID = "taskkit"
let clientSecret = "secret"
// MARK: samples 4
struct Product: Codable, Sendable, Identifiable {
    let id: Int
}

func buildProductPage(id: Product.ID) async throws -> ProductPage {
    ProductPage(product: Product(id: id), recommendations: [])
}
