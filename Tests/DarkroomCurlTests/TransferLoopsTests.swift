import CCurl
import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

@testable import DarkroomCurl

/// Transfers spread over several `curl_multi` loops under one limit (`CurlTransferLoops`). Each
/// test has loops of its own, so the process's shared limit is never changed under other suites.
@Suite("Transfers over several loops")
struct TransferLoopsTests {
  static func transfer(_ url: String, options: HTTPOptions) throws -> CurlTransfer {
    try #require(CurlTransfer(url: url, options: options, conditional: [:], progress: nil))
  }

  static func performAll(_ urls: [String], options: HTTPOptions, on loops: CurlTransferLoops) async throws -> [CurlOutcome] {
    let transfers = try urls.map { try transfer($0, options: options) }
    return await withTaskGroup(of: CurlOutcome.self) { group in
      for transfer in transfers { group.addTask { await loops.perform(transfer) } }
      return await group.reduce(into: []) { $0.append($1) }
    }
  }

  static var loopback: HTTPOptions {
    var options = HTTPOptions()
    options.allowHosts = ["127.0.0.1"]
    return options
  }

  @Test("twelve transfers with a limit of four: four at a time over two loops, each on a connection of its own")
  func limitHoldsAcrossLoops() async throws {
    // Five gathered would answer at once; four at a time each wait out `within` instead.
    let server = try await TestHTTPServer.start(routes: [
      "/held": .gathered(count: 5, within: .milliseconds(150), then: .ok(body: Array("ok".utf8)))
    ])
    defer { Task { try? await server.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 2)
    loops.maxConcurrentTransfers = 4
    let outcomes = try await Self.performAll(
      (0..<12).map { server.url("/held?n=\($0)") }, options: Self.loopback, on: loops)
    #expect(outcomes.allSatisfy { $0.code == CURLE_OK && $0.status == 200 && $0.body.count == 2 })
    #expect(server.peakGathered("/held") == 4)
    #expect(server.peakOpenConnections == 4)
    #expect(server.requestCount("/held") == 12)
    #expect(loops.loopCount == 2)
    #expect(loops.runningCount == 0 && loops.waitingCount == 0)
  }

  @Test("eight transfers at once over at most four loops: four loops, two transfers each, all eight at the server at once")
  func fourLoops() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/held": .gathered(count: 8, within: .seconds(10), then: .ok(body: Array("ok".utf8)))
    ])
    defer { Task { try? await server.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 4)
    loops.maxConcurrentTransfers = 8
    let outcomes = try await Self.performAll((0..<8).map { server.url("/held?n=\($0)") }, options: Self.loopback, on: loops)
    #expect(outcomes.allSatisfy { $0.code == CURLE_OK && $0.status == 200 })
    #expect(server.peakGathered("/held") == 8)
    #expect(loops.loopCount == 4)
  }

  @Test("one transfer at a time keeps to one loop and reuses its connection")
  func sequentialKeepsOneLoop() async throws {
    let server = try await TestHTTPServer.start(routes: ["/a": .ok(body: Array("a".utf8))])
    defer { Task { try? await server.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 2)
    for index in 0..<5 {
      let outcome = await loops.perform(try Self.transfer(server.url("/a?n=\(index)"), options: Self.loopback))
      #expect(outcome.code == CURLE_OK && outcome.status == 200)
    }
    #expect(loops.loopCount == 1)
    #expect(server.connectionCount == 1)
  }

  @Test("an origin's next transfer goes back to the loop of its last one, and its connection, while another origin's runs")
  func originKeepsItsLoop() async throws {
    let first = try await TestHTTPServer.start(routes: ["/a": .ok(body: Array("a".utf8))])
    defer { Task { try? await first.shutdown() } }
    let other = try await TestHTTPServer.start(routes: [
      "/pair": .gathered(count: 2, within: .seconds(30), then: .ok(body: Array("b".utf8)))
    ])
    defer { Task { try? await other.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 2)
    loops.maxConcurrentTransfers = 8
    #expect(await loops.perform(try Self.transfer(first.url("/a?n=1"), options: Self.loopback)).code == CURLE_OK)
    // Held by its server on the first loop until its partner comes.
    let held = try Self.transfer(other.url("/pair?n=1"), options: Self.loopback)
    let heldTask = Task { await loops.perform(held) }
    while other.requestCount("/pair") < 1 { await Task.yield() }
    // The loop with the fewest transfers is a new one; the first origin's connection is not there.
    #expect(await loops.perform(try Self.transfer(first.url("/a?n=2"), options: Self.loopback)).code == CURLE_OK)
    #expect(first.connectionCount == 1)
    #expect(loops.loopCount == 1)
    #expect(await loops.perform(try Self.transfer(other.url("/pair?n=2"), options: Self.loopback)).code == CURLE_OK)
    #expect(await heldTask.value.code == CURLE_OK)
  }

  @Test("transfers to an HTTP/2 origin stay on one loop and share one connection")
  func multiplexedOriginKeepsOneLoop() async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let server = try await tls.server(routes: [
      "/slow": .gathered(count: 6, within: .seconds(10), then: .ok(body: Array("ok".utf8)))
    ])
    defer { Task { try? await server.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 2)
    let options = tls.options(trusting: try TrustedCertificates.file(tls.path("ca.pem"), roots: []))
    let outcomes = try await Self.performAll((0..<6).map { server.url("/slow?n=\($0)") }, options: options, on: loops)
    #expect(outcomes.allSatisfy { $0.code == CURLE_OK && $0.status == 200 })
    #expect(server.peakGathered("/slow") == 6)
    #expect(server.connectionCount == 1)
    #expect(loops.loopCount == 1)
  }

  @Test("a transfer cancelled while it waits for a place ends at once and is never sent")
  func cancelWhileWaiting() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/pair": .gathered(count: 2, within: .seconds(30), then: .ok(body: Array("ok".utf8)))
    ])
    defer { Task { try? await server.shutdown() } }
    let loops = CurlTransferLoops(maxLoops: 2)
    loops.maxConcurrentTransfers = 1
    let first = try Self.transfer(server.url("/pair?n=first"), options: Self.loopback)
    let firstTask = Task { await loops.perform(first) }
    while loops.runningCount < 1 { await Task.yield() }
    let waiting = try Self.transfer(server.url("/pair?n=waiting"), options: Self.loopback)
    let waitingTask = Task { await loops.perform(waiting) }
    while loops.waitingCount < 1 { await Task.yield() }
    waitingTask.cancel()
    let cancelled = await waitingTask.value
    #expect(cancelled.cancelled)
    #expect(loops.waitingCount == 0)
    // Room for a partner: the first transfer's request is answered once a second one arrives.
    loops.maxConcurrentTransfers = 2
    let partner = await loops.perform(try Self.transfer(server.url("/pair?n=partner"), options: Self.loopback))
    let firstOutcome = await firstTask.value
    #expect(partner.code == CURLE_OK && firstOutcome.code == CURLE_OK)
    #expect(!server.requests.contains { $0.path.contains("waiting") })
    #expect(server.requestCount("/pair") == 2)
  }

  @Test("a transfer cancelled before it is asked for never waits for a place")
  func cancelledBeforeAsking() async throws {
    let loops = CurlTransferLoops(maxLoops: 2)
    loops.maxConcurrentTransfers = 1
    let transfer = try Self.transfer("http://127.0.0.1:9/never", options: Self.loopback)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await loops.perform(transfer)
    }
    #expect(await task.value.cancelled)
    #expect(loops.runningCount == 0 && loops.waitingCount == 0)
  }
}
