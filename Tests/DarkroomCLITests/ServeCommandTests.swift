import Darkroom
import DarkroomHTTP
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("darkroom serve, the command")
struct ServeCommandTests {
  @Test("--check-config reports every problem with its JSON path (status 2), or says the file is valid")
  func checkConfig() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let bad = folder + "/bad.json"
    try #"{"bind": "nowhere", "formats": ["webp", "bmp"], "allowUnsafe": true}"#.write(
      toFile: bad, atomically: true, encoding: .utf8)
    let refused = try await Runner.run(["serve", "--config", bad, "--check-config"])
    #expect(refused.status == 2)
    #expect(
      refused.stderr.contains("bind:") && refused.stderr.contains("formats[1]:") && refused.stderr.contains(bad),
      "\(refused.stderr)")
    let good = folder + "/good.json"
    try #"{"origin": "https://images.example/", "key": "k"}"#.write(toFile: good, atomically: true, encoding: .utf8)
    let accepted = try await Runner.run(["serve", "--config", good, "--check-config"])
    #expect(accepted.status == 0 && accepted.stdout.contains("configuration is valid"), "\(accepted.stderr)")
    // Flags override the file, and are checked too.
    let flagged = try await Runner.run(["serve", "--config", good, "--bind", "localhost:99999", "--check-config"])
    #expect(flagged.status == 2 && flagged.stderr.contains("bind"))
    // The file leaves unsafe URLs to the command line.
    let open = folder + "/open.json"
    try #"{"root": "/srv/images"}"#.write(toFile: open, atomically: true, encoding: .utf8)
    #expect(try await Runner.run(["serve", "--config", open, "--allow-unsafe", "--check-config"]).status == 0)
    #expect(try await Runner.run(["serve", "--config", open, "--check-config"]).status == 2)
    let missing = try await Runner.run(["serve", "--config", folder + "/none.json", "--check-config"])
    #expect(missing.status == 2 && missing.stderr.contains("does not exist"))
  }

  @Test("--help lists every setting with its default")
  func help() async throws {
    let help = try await Runner.run(["serve", "--help"])
    #expect(help.status == 0)
    for spec in ServerConfiguration.specs { #expect(help.stdout.contains("  \(spec.name):"), "\(spec.name)") }
    #expect(help.stdout.contains(#"(default "127.0.0.1:8080")"#) && help.stdout.contains(#"(default ["avif","webp"])"#))
  }

  @Test("a real process serves an image, answers /healthz, and exits 0 on SIGTERM")
  func process() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    _ = try TestImages.write(try TestImages.encoded(.jpeg(), width: 400, height: 300), named: "a.jpg", in: folder)
    let child = try StreamingChild.start(["serve", "--bind", "127.0.0.1:0", "--allow-unsafe", "--root", folder])
    let line = try #require(await child.line { $0.contains("listening on http://") })
    let base = try #require(line.split(separator: " ").last.map(String.init))
    let (health, healthResponse) = try await URLSession.shared.data(from: try #require(URL(string: base + "/healthz")))
    #expect((healthResponse as? HTTPURLResponse)?.statusCode == 200 && String(decoding: health, as: UTF8.self) == "ok\n")
    let (image, imageResponse) = try await URLSession.shared.data(
      from: try #require(URL(string: base + "/unsafe/fit-in/100x100/a.jpg")))
    let http = try #require(imageResponse as? HTTPURLResponse)
    #expect(http.statusCode == 200 && http.value(forHTTPHeaderField: "Content-Type") == "image/jpeg")
    let decoded = try ImageDecoder().decode(FetchedData(source: ImageSource("reply"), bytes: ImageBytes([UInt8](image))))
    #expect(decoded.width == 100 && decoded.height == 75)
    kill(child.process.processIdentifier, SIGTERM)
    let result = await child.finish()
    #expect(result.status == 0, "\(result.stderr)")
  }
}
