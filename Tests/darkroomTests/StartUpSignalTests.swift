import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension RunnerBoundaryTests {
  @Test("a SIGTERM during start-up (while the input list is read) stops in order: summary with not started N, exit 143")
  func signalDuringStartUp() throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let child = try StreamingChild.start(
      ["run", "Examples/pipelines/thumbnail.json", "--input-list", "-", "--output", folder + "/out"], feedingInput: true)
    // 4 MiB of the list: once they are written, the runner is reading its input list (a socket
    // buffers far less), so it is still starting and has not looked at one input.
    let count = 100_000
    let list = Data((0..<count).map { "\(folder)/in/\($0).jpg\n" }.joined().utf8)
    let split = list.index(list.startIndex, offsetBy: 4 << 20)
    #expect(child.send(list[..<split]).error == nil)
    kill(child.process.processIdentifier, SIGTERM)
    child.waitForErrorLine { $0.contains("stopping: no new images start") }
    #expect(child.send(list[split...]).error == nil)
    let result = child.finish()
    #expect(result.status == 143, "\(result.stderr)")
    #expect(result.stderr.contains("done 0, failed 0, not started \(count)"), "\(result.stderr)")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: folder + "/out")) ?? []).isEmpty)
  }
}
