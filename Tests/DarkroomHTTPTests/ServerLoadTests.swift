import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

@testable import DarkroomHTTP

#if canImport(Glibc)
  import Glibc
#endif

@Suite("darkroom serve under load: sharing, admission, time limits, disconnects, shutdown")
struct ServerLoadTests {
  @Test("identical concurrent requests make one origin request and one render")
  func oneRenderForIdenticalRequests() async throws {
    let slow = TestResponse.slowHeaders(
      delay: .milliseconds(300), then: .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"))
    let origin = try await TestHTTPServer.start(routes: ["/a.jpg": slow])
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.concurrency = 1
    configuration.queue = 0
    let running = try await RunningServer.start(configuration)
    let replies = try await withThrowingTaskGroup(of: HTTPReply.self) { group in
      for _ in 0..<200 { group.addTask { try await running.get("/unsafe/fit-in/100x100/a.jpg") } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(replies.allSatisfy { $0.status == 200 })
    #expect(Set(replies.map(\.body)).count == 1)
    #expect(origin.requestCount("/a.jpg") == 1)
    #expect(try await running.metric("darkroom_renders_total") == 1)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("beyond its renders and its queue the server answers 429 with Retry-After, and serves the rest")
  func burst() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 8, delay: .milliseconds(400))
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.concurrency = 1
    configuration.queue = 1
    configuration.retryAfter = 2
    let running = try await RunningServer.start(configuration)
    let replies = try await withThrowingTaskGroup(of: HTTPReply.self) { group in
      for index in 0..<8 { group.addTask { try await running.get("/unsafe/32x32/\(index).jpg") } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    let refused = replies.filter { $0.status == 429 }
    #expect(!refused.isEmpty)
    #expect(refused.allSatisfy { $0.headers["retry-after"] == "2" })
    #expect(replies.filter { $0.status == 200 }.count >= 2)
    #expect(replies.allSatisfy { $0.status == 200 || $0.status == 429 })
    #expect(running.server.gate.holders == 0 && running.server.gate.waiting == 0)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("the time limit stops the libvips work itself, not only the response")
  func timeLimitStopsWork() async throws {
    // A noisy PNG enlarged ninefold with Lanczos and encoded as a best-quality JPEG: seconds of
    // CPU, all of it streamed through libvips (so its kill flag can stop it).
    let pixels = [UInt8](unsafeUninitializedCapacity: 1500 * 1500 * 3) { buffer, count in  // not `map`: slow in debug
      for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: (index &* 2_654_435_761) >> 13) }
      count = buffer.count
    }
    let image = try VipsImage.fromPixels(pixels, width: 1500, height: 1500, bands: 3)
    let png = try ImageEncoder(.png(compression: 1)).encode(
      DecodedImage(source: ImageSource("noise"), image: image, sourceFormat: .png, sourceWidth: 1500, sourceHeight: 1500))
    let origin = try await TestHTTPServer.start(routes: ["/noise.png": .ok(body: Array(png.bytes.data), contentType: "image/png")]
    )
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.timeout = 0.2
    configuration.resultCache = false
    configuration.maxOutputPixels = 100_000_000
    let running = try await RunningServer.start(configuration)
    let pool = running.server.loader.scheduler.cpuPool
    let reply = try await running.get("/unsafe/9000x9000/filters:format(jpeg):quality(100)/noise.png")
    #expect(reply.status == 504)
    // Every computation of the render has left the pool. A libvips computation holds its pool
    // thread until its workers stop, so the time the pool was busy is how long the work went on:
    // the 0.2 s limit and a little more.
    #expect(try await eventually { pool.runningCount == 0 })
    let limited = pool.busyTime
    #expect(limited < .milliseconds(1_200), "the render went on for \(limited)")
    // The same render without a limit goes on far longer: the limit is what stopped it.
    var unlimited = configuration
    unlimited.timeout = 600
    let control = try await RunningServer.start(unlimited)
    let controlPool = control.server.loader.scheduler.cpuPool
    #expect(try await control.get("/unsafe/9000x9000/filters:format(jpeg):quality(100)/noise.png").status == 200)
    #expect(controlPool.busyTime > limited * 3, "unlimited \(controlPool.busyTime), limited \(limited)")
    try await control.stop()
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a client that hangs up cancels its render; the others are not disturbed")
  func disconnectCancels() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/slow.jpg": .slowHeaders(delay: .seconds(30), then: .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg")),
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(), contentType: "image/jpeg"),
    ])
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let socket = try await running.abandonableRequest("/unsafe/64x64/slow.jpg")
    #expect(try await eventually { origin.requestCount("/slow.jpg") == 1 })
    close(socket)
    #expect(try await eventually { try await running.metric(#"darkroom_http_requests_total{status="499"}"#) == 1 })
    #expect(try await eventually { running.server.loader.activeCount == 0 })
    // The origin's transfer was abandoned too: its connection is gone.
    #expect(try await running.get("/unsafe/64x64/a.jpg").status == 200)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a connection stays open for the next request (keep-alive), for renders, hits and errors alike")
  func keepAlive() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 2, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let paths = [
      "/unsafe/40x40/0.jpg", "/unsafe/40x40/0.jpg", "/unsafe/40x40/1.jpg", "/unsafe/filters:watermark(1)/0.jpg", "/healthz",
    ]
    let (replies, stayedOpen) = try await RawSocket.keepAlive(port: running.port, paths: paths)
    #expect(stayedOpen)
    #expect(replies.map(\.status) == [200, 200, 200, 400, 200])
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a client that hangs up leaves a render it shares to the others")
  func sharedDisconnect() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .milliseconds(600))
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let socket = try await running.abandonableRequest("/unsafe/48x48/0.jpg")
    #expect(try await eventually { origin.requestCount("/0.jpg") == 1 })
    let staying = Task { try await running.get("/unsafe/48x48/0.jpg") }
    let renders = running.server.renders
    #expect(try await eventually { renders.runningKeys.first.map { renders.waiters(for: $0) } == 2 })
    close(socket)
    let reply = try await staying.value
    #expect(reply.status == 200)
    #expect(try size(of: reply.body) == (48, 48))
    #expect(origin.requestCount("/0.jpg") == 1)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("shutdown finishes every response in flight, then stops")
  func gracefulShutdown() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 4, delay: .milliseconds(500))
    var configuration = ServedFixtures.configuration(origin: origin.baseURL)
    configuration.concurrency = 4  // all four in flight at once
    let running = try await RunningServer.start(configuration)
    let replies = Task {
      try await withThrowingTaskGroup(of: HTTPReply.self) { group in
        for index in 0..<4 { group.addTask { try await running.get("/unsafe/32x32/\(index).jpg") } }
        return try await group.reduce(into: []) { $0.append($1) }
      }
    }
    #expect(try await eventually { (0..<4).allSatisfy { origin.requestCount("/\($0).jpg") == 1 } })
    try await running.stop()
    let answered = try await replies.value
    #expect(answered.count == 4 && answered.allSatisfy { $0.status == 200 && !$0.body.isEmpty })
    #expect(!running.server.isReady)
    await #expect(throws: (any Error).self) { try await running.get("/healthz") }
    try await origin.shutdown()
  }
}
