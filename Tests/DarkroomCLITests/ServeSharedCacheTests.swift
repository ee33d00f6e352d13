import Darkroom
import DarkroomHTTPTestServer
import DarkroomPostgresTestServer
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `darkroom serve --shared-cache`: instances sharing one result cache on a real PostgreSQL server.
@Suite("darkroom serve --shared-cache")
struct ServeSharedCacheTests {
  /// The value of a counter in Prometheus text (`name` with its labels, as written).
  func counter(_ metrics: String, _ name: String) -> Double {
    metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
  }

  /// Starts `darkroom serve` with `config` on the setup's database; the instance and its base URL.
  func instance(config: String, _ setup: QueueWorkerTests.Setup) async throws -> (StreamingChild, String) {
    let child = try StreamingChild.start(["serve", "--bind", "127.0.0.1:0", "--config", config, "--shared-cache", setup.url])
    guard let line = await child.line(where: { $0.contains("listening on http://") }),
      let base = line.split(separator: " ").last.map(String.init)
    else {
      kill(child.process.processIdentifier, SIGTERM)
      let ended = await child.finish()
      throw PostgresTestServer.Failure(message: "serve did not start: \(ended.stderr)")
    }
    // Until its shared cache listens, an instance wakes a waiter at once (to look again), and
    // the waiter renders on its own: the tests count renders and fetches.
    await child.waitForErrorLine { $0.contains("the shared cache listens") }
    let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
    #expect(counter(String(decoding: data, as: UTF8.self), "darkroom_shared_cache_listening") == 1)
    return (child, base)
  }

  /// Stops the instances (SIGTERM) and says whether each exited 0.
  func stop(_ children: [StreamingChild]) async -> [Int32] {
    for child in children { kill(child.process.processIdentifier, SIGTERM) }
    var statuses: [Int32] = []
    for child in children { statuses.append(await child.finish().status) }
    return statuses
  }

  /// A status and body for each URL, fetched all at once.
  func fetchAll(_ urls: [String]) async throws -> [(Int, Data)] {
    try await withThrowingTaskGroup(of: (Int, Data).self) { group in
      for text in urls {
        let url = try #require(URL(string: text))
        group.addTask {
          let (body, response) = try await URLSession.shared.data(from: url)
          return ((response as? HTTPURLResponse)?.statusCode ?? 0, body)
        }
      }
      var answers: [(Int, Data)] = []
      for try await answer in group { answers.append(answer) }
      return answers
    }
  }

  /// The instance's `darkroom_shared_cache_total` counters and `darkroom_renders_total`.
  func outcomes(_ base: String) async throws -> [String: Double] {
    let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
    let metrics = String(decoding: data, as: UTF8.self)
    var found = ["renders": counter(metrics, "darkroom_renders_total")]
    for outcome in ["hit", "rendered", "waited", "unavailable"] {
      found[outcome] = counter(metrics, "darkroom_shared_cache_total{outcome=\"\(outcome)\"}")
    }
    return found
  }

  @Test("60 different images at once on an instance with 2 render slots: renders wait for a slot, never for the shared cache")
  func manyKeysFewSlots() async throws {
    let setup = try await QueueWorkerTests.Setup.start()
    let jpeg = try TestImages.encoded(.jpeg(), width: 200, height: 150).withUnsafeBytes { Array($0) }
    let origin = try await TestHTTPServer.start(routes: ["/a.jpg": .ok(body: jpeg, contentType: "image/jpeg")])
    let config = setup.folder + "/serve.json"
    try #"{"privateHosts": ["127.0.0.1"], "origin": "\#(origin.baseURL)/", "allowUnsafe": true, "concurrency": 2, "queue": 100}"#
      .write(toFile: config, atomically: true, encoding: .utf8)
    let (child, base) = try await instance(config: config, setup)
    do {
      // Before claims were taken inside the admission gate, each queued render held a pooled
      // connection in an open transaction, and lookups starved until the 15-second limit.
      let answers = try await fetchAll((0..<60).map { base + "/unsafe/fit-in/\(20 + $0)x\(20 + $0)/a.jpg" })
      #expect(answers.count == 60 && answers.allSatisfy { $0.0 == 200 })
      let outcomes = try await outcomes(base)
      #expect(outcomes["rendered"] == 60 && outcomes["unavailable"] == 0, "\(outcomes)")
    } catch {
      _ = await stop([child])
      throw error
    }
    #expect(await stop([child]) == [0])
    try await origin.shutdown()
    await setup.stop()
  }

  @Test("a render that fails for its source fails everywhere in the cluster, from one fetch")
  func sharedFailure() async throws {
    let setup = try await QueueWorkerTests.Setup.start()
    // Slow enough that all ten requests are waiting on the one fetch even on a loaded machine:
    // a failure is not cached, so a request that came after it would fetch again (CI saw 2
    // fetches at 400 ms with other work on the cores).
    let origin = try await TestHTTPServer.start(routes: [
      "/gone.jpg": .slowHeaders(delay: .milliseconds(1_500), then: .status(404))
    ])
    let config = setup.folder + "/serve.json"
    try #"{"privateHosts": ["127.0.0.1"], "origin": "\#(origin.baseURL)/", "allowUnsafe": true}"#.write(
      toFile: config, atomically: true, encoding: .utf8)
    var children: [StreamingChild] = []
    do {
      var bases: [String] = []
      for _ in 0..<2 {
        let (child, base) = try await instance(config: config, setup)
        children.append(child)
        bases.append(base)
      }
      let answers = try await fetchAll((0..<10).map { bases[$0 % 2] + "/unsafe/fit-in/64x64/gone.jpg" })
      #expect(answers.map(\.0) == Array(repeating: 404, count: 10))
      #expect(origin.requestCount("/gone.jpg") == 1)
    } catch {
      _ = await stop(children)
      throw error
    }
    #expect(await stop(children) == [0, 0])
    try await origin.shutdown()
    await setup.stop()
  }

  @Test("two instances sharing a cache: 100 concurrent requests for one image, spread over both, make one render")
  func oneRenderInTheCluster() async throws {
    let setup = try await QueueWorkerTests.Setup.start()
    let jpeg = try TestImages.encoded(.jpeg(), width: 800, height: 600).withUnsafeBytes { Array($0) }
    // The origin answers slowly, so that every request arrives while the one render runs.
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .slowHeaders(delay: .milliseconds(400), then: .ok(body: jpeg, contentType: "image/jpeg"))
    ])
    var children: [StreamingChild] = []
    do {
      let config = setup.folder + "/serve.json"
      try #"{"privateHosts": ["127.0.0.1"], "origin": "\#(origin.baseURL)/", "allowUnsafe": true}"#.write(
        toFile: config, atomically: true, encoding: .utf8)
      var bases: [String] = []
      for _ in 0..<2 {
        let child = try StreamingChild.start([
          "serve", "--bind", "127.0.0.1:0", "--config", config, "--shared-cache", setup.url,
        ])
        children.append(child)
        let line = try #require(await child.line { $0.contains("listening on http://") })
        bases.append(try #require(line.split(separator: " ").last.map(String.init)))
      }
      let answers = try await fetchAll((0..<100).map { bases[$0 % 2] + "/unsafe/fit-in/120x120/a.jpg" })
      #expect(answers.count == 100 && answers.allSatisfy { $0.0 == 200 })
      #expect(Set(answers.map(\.1)).count == 1)  // the same bytes everywhere
      #expect(origin.requestCount("/a.jpg") == 1)
      var renders = 0.0
      var outcomes: [String: Double] = [:]
      for base in bases {
        let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
        let metrics = String(decoding: data, as: UTF8.self)
        renders += counter(metrics, "darkroom_renders_total")
        for outcome in ["hit", "rendered", "waited", "unavailable"] {
          outcomes[outcome, default: 0] += counter(metrics, "darkroom_shared_cache_total{outcome=\"\(outcome)\"}")
        }
      }
      #expect(renders == 1 && outcomes["rendered"] == 1 && outcomes["unavailable"] == 0, "\(outcomes)")
      // The other instance waited for the render, or (had it asked later) found it stored.
      #expect((outcomes["waited"] ?? 0) + (outcomes["hit"] ?? 0) >= 1, "\(outcomes)")
      // A new instance answers from the shared cache without a render.
      let late = try StreamingChild.start(["serve", "--bind", "127.0.0.1:0", "--config", config, "--shared-cache", setup.url])
      children.append(late)
      let line = try #require(await late.line { $0.contains("listening on http://") })
      let base = try #require(line.split(separator: " ").last.map(String.init))
      let (body, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/unsafe/fit-in/120x120/a.jpg")))
      #expect(body == answers.first?.1)
      let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
      let metrics = String(decoding: data, as: UTF8.self)
      #expect(
        counter(metrics, "darkroom_renders_total") == 0 && counter(metrics, "darkroom_shared_cache_total{outcome=\"hit\"}") == 1)
      #expect(origin.requestCount("/a.jpg") == 1)
    } catch {
      for child in children { kill(child.process.processIdentifier, SIGTERM) }
      for child in children { _ = await child.finish() }
      try? await origin.shutdown()
      await setup.stop()
      throw error
    }
    for child in children { kill(child.process.processIdentifier, SIGTERM) }
    for child in children {
      let ended = await child.finish()
      #expect(ended.status == 0, "\(ended.stderr)")
    }
    try await origin.shutdown()
    await setup.stop()
  }
}
