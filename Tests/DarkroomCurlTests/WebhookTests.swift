import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

/// Webhook delivery against a real local server. Part of the serialized "HTTP fetching" suite:
/// its leak checks read a process-wide count of live transfers.
extension HTTPTransportTests {
  func webhook(_ url: String, retries: Int = 3) -> WebhookSink {
    var options = HTTPOptions()
    options.allowHosts = ["127.0.0.1"]
    options.retryBaseDelay = .milliseconds(20)
    return WebhookSink(url: url, timeout: .seconds(5), retries: retries, options: options)
  }

  func decodedBody(_ request: RecordedRequest) throws -> LoadNotification {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(LoadNotification.self, from: Data(request.body))
  }

  @Test("a webhook POSTs each notification's JSON; a failing endpoint is retried until it recovers")
  func webhookRetriesUntilRecovered() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/hook": .sequence([.status(503), .status(500), .status(204)])
    ])
    defer { Task { try? await server.shutdown() } }
    let notifier = Notifier(sinks: [webhook(server.url("/hook"))])
    let sent = LoadNotification(
      name: "thumbnailReady", pipeline: "thumbs", source: "https://example.com/a.jpg",
      image: .init(width: 64, height: 48, format: "webp", bytes: 1234))
    notifier.post(sent)
    await notifier.flush()
    #expect(server.requestCount("/hook") == 3)
    let statistics = try #require(notifier.statistics.first?.statistics)
    #expect(statistics.delivered == 1 && statistics.failed == 0)
    let last = try #require(server.requests.last)
    #expect(last.method == "POST" && last.headers["content-type"] == "application/json")
    let received = try decodedBody(last)
    #expect(received.name == sent.name && received.image == sent.image && received.source == sent.source)
    await notifier.close()
    #expect(HTTPTransport.liveTransfers == 0)
  }

  @Test("an endpoint that stays down fails that notification (notifyFailed) and the next ones still go")
  func webhookDownThenUp() async throws {
    let server = try await TestHTTPServer.start(routes: ["/down": .status(500)])
    defer { Task { try? await server.shutdown() } }
    let notifier = Notifier(sinks: [webhook(server.url("/down"), retries: 1)])
    notifier.post(LoadNotification(name: "first", pipeline: "p"))
    await notifier.flush()
    var statistics = try #require(notifier.statistics.first?.statistics)
    #expect(statistics.failed == 1 && statistics.delivered == 0)
    #expect(statistics.lastError?.contains("500") == true && statistics.lastError?.contains("webhook") == true)
    #expect(server.requestCount("/down") == 2)  // the attempt and one retry

    server.setRoute("/down", .status(200))
    notifier.post(LoadNotification(name: "second", pipeline: "p"))
    await notifier.close()
    statistics = try #require(notifier.statistics.first?.statistics)
    #expect(statistics.failed == 1 && statistics.delivered == 1)
    #expect(try decodedBody(try #require(server.requests.last)).name == "second")
  }

  @Test("a notify stage with a webhook announces the image and how the operation ended")
  func notifyStageWebhook() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: image, contentType: "image/jpeg"), "/hook": .status(204),
    ])
    defer { Task { try? await server.shutdown() } }
    let notifier = Notifier(sinks: [webhook(server.url("/hook"))])
    let fetch = Fetcher(transports: [loaderHTTP()])
    let pipeline = Pipeline(name: "hooked") {
      fetch
      ImageDecoder()
      Resizer(width: 32)
      ImageEncoder(.png())
      Notify<EncodedImage>("thumbnailReady", notifier: notifier)
    }
    _ = try await ImageLoader().load(ImageSource(server.url("/a.jpg")), pipeline: pipeline).value
    _ = await ImageLoader().load(ImageSource(server.url("/missing.jpg")), pipeline: pipeline).result
    await notifier.close()
    let posted = try server.requests.filter { $0.path == "/hook" }.map(decodedBody)
    #expect(posted.map(\.name) == ["thumbnailReady", "didFinish", "didFail"])
    #expect(posted[0].image?.width == 32 && posted[0].image?.height == 24 && posted[0].image?.format == "png")
    #expect(posted[2].error?.code == "httpStatus" && posted[2].error?.httpStatus == 404)
  }
}
