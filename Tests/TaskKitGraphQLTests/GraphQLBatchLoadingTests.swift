// The worked example of the "Batch loading" section of the DocC article
// Sources/TaskKit/TaskKit.docc/UsingKeyedMonoTask.md, run against a real Graphiti schema: the
// code between "Article code" and "End of article code" is what the article shows, block for
// block (`articleShowsThisCode` checks it), and the tests run it. Built only with the package
// trait `Examples` (Graphiti is a dependency of this repository's tests and examples only).
#if Examples
// MARK: - Article code

import Foundation
import Graphiti
import TaskKit

struct User: Sendable, Equatable {
    var id: Int
    var name: String
    var friendIDs: [Int]
}

/// The database: one call returns any number of users.
protocol UserStore: Sendable {
    func users(first: Int) async throws -> [User]
    func users(ids: [Int]) async throws -> [User]
}

/// Made for each request: its loader caches users for that request only.
struct Context: Sendable {
    let store: any UserStore
    let users: KeyedMonoTask<Int, User>

    init(store: any UserStore) {
        self.store = store
        users = KeyedMonoTask(
            maximumEntries: 10_000,
            resultExpireDuration: nil,     // kept until the request ends
            maximumBatchSize: 1_000
        ) { ids in
            let users = try await store.users(ids: ids)  // one query for the whole batch
            return Dictionary(uniqueKeysWithValues: users.map { ($0.id, $0) })
        }
    }
}

struct UsersResolver: Sendable {
    struct UsersArguments: Codable {
        var first: Int
    }

    func users(context: Context, arguments: UsersArguments) async throws -> [User] {
        try await context.store.users(first: arguments.first)
    }
}

extension User {
    /// Through the request's loader: the friends of every user in the response go in one batch.
    func friends(context: Context, arguments: NoArguments) async throws -> [User] {
        let results = await context.users.values(for: friendIDs)
        return try friendIDs.map { id in try results[id]!.get() }
    }
}

struct UsersAPI: API {
    let resolver = UsersResolver()
    let schema = try! Schema<UsersResolver, Context> {
        Type(User.self) {
            Field("id", at: \.id)
            Field("name", at: \.name)
            Field("friends", at: User.friends)
        }
        Query {
            Field("users", at: UsersResolver.users) {
                Argument("first", at: \.first)
            }
        }
    }
}

let usersAPI = UsersAPI()

/// Answers one request with a context of its own: a new loader, whose cache lives as long as
/// the request.
func respond(to query: String, store: any UserStore) async throws -> Data {
    let result = try await usersAPI.execute(request: query, context: Context(store: store))
    return try JSONEncoder().encode(result)
}

let usersAndFriends = """
    { users(first: 100) { id name friends { id name } } }
    """

// MARK: - End of article code

import TaskKitTestSupport
import Testing

/// An in-memory `UserStore` of 100 users, each with 3 friends among them, that counts its calls.
final class CountingUserStore: UserStore {
    let all: [User]
    /// How many keys each call had (`users(first:)` counts as 0).
    private let calls = LockedState<[Int]>([])

    init() {
        all = (1...100).map { id in
            User(id: id, name: "user \(id)", friendIDs: [7, 31, 62].map { step in (id + step - 1) % 100 + 1 })
        }
    }

    var callCount: Int { calls.withLock { $0.count } }
    var keysPerCall: [Int] { calls.withLock { $0 } }

    func users(first: Int) async throws -> [User] {
        calls.withLock { $0.append(0) }
        return Array(all.prefix(first))
    }

    func users(ids: [Int]) async throws -> [User] {
        calls.withLock { $0.append(ids.count) }
        return ids.map { all[$0 - 1] }
    }
}

extension User {
    /// The plain resolver: one query per `friends` field, no loader.
    func friendsUnbatched(context: Context, arguments: NoArguments) async throws -> [User] {
        try await context.store.users(ids: friendIDs)
    }
}

/// The same schema with the plain `friends` resolver.
struct UnbatchedUsersAPI: API {
    let resolver = UsersResolver()
    let schema = try! Schema<UsersResolver, Context> {
        Type(User.self) {
            Field("id", at: \.id)
            Field("name", at: \.name)
            Field("friends", at: User.friendsUnbatched)
        }
        Query {
            Field("users", at: UsersResolver.users) {
                Argument("first", at: \.first)
            }
        }
    }
}

@Suite(.scaledTimeLimit(minutes: 2))
struct GraphQLBatchLoadingTests {
    /// The plain resolvers' answer, and their calls of a store of their own.
    static func plainAnswer() async throws -> (json: GraphQLResultJSON, store: CountingUserStore) {
        let store = CountingUserStore()
        let api = UnbatchedUsersAPI()
        let result = try await Task { try await api.execute(request: usersAndFriends, context: Context(store: store)) }
            .boundedValue()
        #expect(result.errors.isEmpty, "\(result.errors)")
        return (try GraphQLResultJSON(JSONEncoder().encode(result)), store)
    }

    /// The article's `respond(to:store:)` with a new store, in a task of `priority`, within a
    /// deadline.
    static func batchedAnswer(
        priority: TaskPriority? = nil
    ) async throws -> (json: GraphQLResultJSON, store: CountingUserStore) {
        let store = CountingUserStore()
        let data = try await Task(priority: priority) { try await respond(to: usersAndFriends, store: store) }
            .boundedValue()
        return (try GraphQLResultJSON(data), store)
    }

    @Test func batchedResolversMakeTwoCallsWherePlainOnesMake101() async throws {
        let plain = try await Self.plainAnswer()
        #expect(plain.store.callCount == 101)  // the list, then one query per user's friends
        #expect(plain.json.object["errors"] == nil)

        // Repeated: the count must not depend on how the resolvers' tasks happen to be scheduled.
        for _ in 0..<20 {
            let batched = try await Self.batchedAnswer()
            #expect(batched.store.callCount <= 2)
            // The list, then every friend of every user (all 100 users) in one batch.
            #expect(batched.store.keysPerCall == [0, 100])
            #expect(batched.json == plain.json)
        }
    }

    /// The same from request tasks of the default priority and above. (The batch's dispatch task
    /// is detached, at the default priority: requests at `.low` or `.background` saw their keys
    /// split over two calls about once in 40 queries here, since the dispatch task's yields let
    /// no lower-priority resolver run.)
    @Test(arguments: [TaskPriority.medium, .high])
    func batchedResolversMakeTwoCallsAtAnyPriority(_ priority: TaskPriority) async throws {
        let plain = try await Self.plainAnswer()
        for _ in 0..<20 {
            let batched = try await Self.batchedAnswer(priority: priority)
            #expect(batched.store.keysPerCall == [0, 100])
            #expect(batched.json == plain.json)
        }
    }

    /// The same under load: both cores busy with other tasks while the query runs.
    @Test func batchedResolversMakeTwoCallsUnderLoad() async throws {
        let plain = try await Self.plainAnswer()
        let stop = LockedState(false)
        let spinners = (0..<4).map { _ in
            Task.detached {
                var spins = 0
                while !stop.withLock({ $0 }) {
                    spins &+= 1
                    if spins % 1_000 == 0 { await Task.yield() }
                }
            }
        }
        defer {
            stop.withLock { $0 = true }
            for spinner in spinners { spinner.cancel() }
        }
        for _ in 0..<20 {
            let batched = try await Self.batchedAnswer()
            #expect(batched.store.keysPerCall == [0, 100])
            #expect(batched.json == plain.json)
        }
    }

    /// The answer itself: 100 users in order, each with its 3 friends in order.
    @Test func theAnswerHasEveryUserAndTheirFriends() async throws {
        let batched = try await Self.batchedAnswer()
        let expected = try GraphQLResultJSON(JSONEncoder().encode(Expected(users: batched.store.all)))
        #expect(batched.json == expected)
    }

    /// Every ```swift block of the article's "Batch loading" section is in this file's article code.
    @Test func articleShowsThisCode() throws {
        let thisFile = URL(fileURLWithPath: #filePath)
        let root = thisFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = try String(
            contentsOf: root.appendingPathComponent("Sources/TaskKit/TaskKit.docc/UsingKeyedMonoTask.md"),
            encoding: .utf8
        )
        let source = try String(contentsOf: thisFile, encoding: .utf8)
        let articleCode = try #require(source.range(of: "// MARK: - Article code\n")).upperBound
        let articleCodeEnd = try #require(source.range(of: "// MARK: - End of article code")).lowerBound
        let code = source[articleCode..<articleCodeEnd]
        let section = try #require(article.range(of: "### Batch loading")).upperBound
        let sectionEnd = article[section...].range(of: "\n## ")?.lowerBound ?? article.endIndex
        let blocks = article[section..<sectionEnd].components(separatedBy: "```swift\n").dropFirst()
            .map { $0.components(separatedBy: "```").first ?? "" }
        #expect(!blocks.isEmpty)
        for block in blocks {
            #expect(code.contains(block), "the article's block is not in the test's article code:\n\(block)")
        }
    }
}

/// What the query should answer, encoded the way GraphQL's result is.
struct Expected: Encodable {
    struct Friend: Encodable {
        var id: Int
        var name: String
    }

    struct Item: Encodable {
        var id: Int
        var name: String
        var friends: [Friend]
    }

    var data: [String: [Item]]

    init(users: [User]) {
        let byID = Dictionary(uniqueKeysWithValues: users.map { ($0.id, $0) })
        data = [
            "users": users.map { user in
                Item(
                    id: user.id, name: user.name,
                    friends: user.friendIDs.map { Friend(id: $0, name: byID[$0]!.name) }
                )
            }
        ]
    }
}

/// A GraphQL result as JSON: equal when the JSON values are.
struct GraphQLResultJSON: Equatable {
    let object: NSDictionary

    init(_ json: Data) throws {
        object = try #require(JSONSerialization.jsonObject(with: json) as? NSDictionary)
    }
}
#endif
