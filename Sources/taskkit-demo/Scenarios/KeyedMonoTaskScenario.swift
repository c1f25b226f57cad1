#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKit
import TaskKitHTTP
import TaskKitLoopbackServer

extension Scenario {
    /// KeyedMonoTask: user profiles loaded through URLTaskManager, one request per user however
    /// many callers ask; a bounded cache; invalidation; a batch through values(for:).
    static let keyedMonoTask = Scenario(name: "keyed", title: "KeyedMonoTask — a bounded profile cache over URLTaskManager") {
        context, record in
        let server = context.server
        let http = URLTaskManager(
            interceptors: [HTTPRetryPolicy()], transport: URLSessionTransport(), timeout: .seconds(10)
        )
        let load: @Sendable (String) async throws -> DemoProfile = { user in
            var components = URLComponents(url: server.url("/profile"), resolvingAgainstBaseURL: false)!
            components.queryItems = [URLQueryItem(name: "user", value: user)]
            let (data, response) = try await http.data(for: URLRequest(url: components.url!))
            guard response.statusCode == 200 else { throw DemoError.status(response.statusCode) }
            return try JSONDecoder().decode(DemoProfile.self, from: data)
        }
        let profiles = KeyedMonoTask<String, DemoProfile>(
            maximumEntries: 16, resultExpireDuration: .seconds(60), staleWhileRevalidate: .seconds(300)
        ) { user in
            try await load(user)
        }

        // 1. 20 users x 50 concurrent callers each: one request per user.
        let users = (1...20).map { "user\($0)" }
        let before = await server.hits(.profile)
        let start = ContinuousClock.now
        let correct = await withTaskGroup(of: Bool.self) { group in
            for caller in 0..<(users.count * 50) {
                let user = users[caller % users.count]
                group.addTask { (try? await profiles.value(for: user))?.user == user }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let requests = await server.hits(.profile) - before
        record.measure("1,000 callers over 20 users", "\(start.duration(to: .now).milliseconds) for all, upstream requests: \(requests)")
        record.expect("callers served their own user's profile", correct, equals: 1_000)
        record.expect("upstream requests for 20 users x 50 callers", requests, equals: 20)

        // 2. The bound: 16 entries at most once the loads are over, unread values evicted first.
        record.expect("entries held (maximumEntries 16)", profiles.count, atMost: 16)
        record.expect("evictions", profiles.counters.evictions, atLeast: 4)

        // 3. A second wave for the 16 cached users: answered from the cache, no request.
        let cached = users.filter { profiles.cachedValue(for: $0) != nil }
        let beforeHits = await server.hits(.profile)
        for user in cached { _ = try? await profiles.value(for: user) }
        record.expect("upstream requests for cached users", await server.hits(.profile) - beforeHits, equals: 0)

        // 4. invalidate: the next reader loads again.
        if let user = cached.first {
            profiles.invalidate(user)
            let beforeInvalidate = await server.hits(.profile)
            let reloaded = try await profiles.value(for: user)
            record.expect("reloaded after invalidate", reloaded.user, equals: user)
            record.expect("upstream requests after invalidate", await server.hits(.profile) - beforeInvalidate, equals: 1)
        }

        // 5. A team page: 5 members in parallel, at most one request per missing member.
        let team = ["team1", "team2", "team3", "team4", "team5"]
        let beforeTeam = await server.hits(.profile)
        let teamStart = ContinuousClock.now
        let results = await profiles.values(for: team + team)
        let teamElapsed = teamStart.duration(to: .now)
        record.measure("values(for:) of 5 uncached members", "\(teamElapsed.milliseconds) (each request takes about 200 ms)")
        record.expect("team profiles loaded", results.values.filter { (try? $0.get()) != nil }.count, equals: 5)
        record.expect("upstream requests for the team", await server.hits(.profile) - beforeTeam, equals: 5)
        record.expect("loaded in parallel (well under 5 x 200 ms)", teamElapsed < .milliseconds(800), equals: true)
        record.measure("counters", profiles.counters.description)

        // 6. 60 concurrent callers over 6 users nobody loaded yet, each sending its own request,
        //    then through a KeyedMonoTask.
        let visitors = (1...6).map { "visitor\($0)" }
        let comparedCallers = 60
        let profileRequests: @Sendable (LoopbackServer) async -> Int = { await $0.hits(.profile) }
        let naive = await measuredRun(server, counting: profileRequests) {
            await withTaskGroup(of: Void.self) { group in
                for caller in 0..<comparedCallers {
                    let user = visitors[caller % visitors.count]
                    group.addTask { _ = try? await load(user) }
                }
            }
        }
        let visitorProfiles = KeyedMonoTask<String, DemoProfile>(maximumEntries: 16, resultExpireDuration: .seconds(60)) {
            user in try await load(user)
        }
        let keyed = await measuredRun(server, counting: profileRequests) {
            await withTaskGroup(of: Void.self) { group in
                for caller in 0..<comparedCallers {
                    let user = visitors[caller % visitors.count]
                    group.addTask { _ = try? await visitorProfiles.value(for: user) }
                }
            }
        }
        record.compare(
            "keyed", workload: "\(comparedCallers) concurrent callers over \(visitors.count) users", counted: "GET /profile",
            naive: naive, taskKit: keyed
        )
    }
}

/// The loopback server's `GET /profile` body.
struct DemoProfile: Decodable, Sendable {
    var user: String
    var name: String
    var plan: String
}
#endif
