import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("File fetching")
struct FetcherTests {
  let folder: String

  init() throws {
    folder = NSTemporaryDirectory() + "darkroom-fetch-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder + "/root/inner", withIntermediateDirectories: true)
    try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: folder + "/root/inner/a.bin"))
    try Data(repeating: 2, count: 10).write(to: URL(fileURLWithPath: folder + "/outside.bin"))
    try FileManager.default.createSymbolicLink(atPath: folder + "/root/link.bin", withDestinationPath: folder + "/outside.bin")
  }

  func code(_ fetcher: Fetcher, _ path: String) async -> PipelineError.Code? {
    do {
      _ = try await StageHarness().run(fetcher, on: ImageSource(path))
      return nil
    } catch let error as PipelineError {
      return error.code
    } catch {
      return .stageFailed
    }
  }

  @Test func readsWithinLimits() async throws {
    let data = try await StageHarness().run(
      Fetcher(root: folder + "/root"), on: ImageSource("file://" + folder + "/root/inner/a.bin"))
    #expect(data.bytes.count == 100)
    #expect(await code(Fetcher(maxBytes: 99), folder + "/root/inner/a.bin") == .tooLarge)
    #expect(await code(Fetcher(maxBytes: 100), folder + "/root/inner/a.bin") == nil)
  }

  @Test("paths and symlinks escaping the root are refused")
  func confinement() async {
    let fetcher = Fetcher(root: folder + "/root")
    #expect(await code(fetcher, folder + "/root/../outside.bin") == .accessDenied)
    #expect(await code(fetcher, folder + "/root/link.bin") == .accessDenied)
    #expect(await code(fetcher, folder + "/root/missing.bin") == .notFound)
    #expect(await code(fetcher, folder + "/root/inner") == .invalidInput)
    // Two roots: the narrower one wins.
    #expect(await code(Fetcher(roots: [folder, folder + "/root/inner"]), folder + "/outside.bin") == .accessDenied)
  }

  @Test("a FIFO is refused at once instead of blocking a thread")
  func fifo() async {
    let path = folder + "/pipe"
    #expect(mkfifo(path, 0o600) == 0)
    #expect(await code(Fetcher(), path) == .invalidInput)
  }

  @Test("other schemes say what is supported")
  func schemes() async {
    do {
      _ = try await StageHarness().run(Fetcher(), on: ImageSource("ftp://example.com/a.jpg"))
      Issue.record("fetched ftp")
    } catch let error as PipelineError {
      #expect(error.code == .invalidInput)
      #expect(error.message.contains("the scheme \"ftp\" is not supported"))
    } catch {
      Issue.record("\(error)")
    }
  }
}
