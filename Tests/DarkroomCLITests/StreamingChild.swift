import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The runner started with its stdout and stderr read line by line as they come, so a test can
/// act on what it says (send a signal after the first image finished, or once it says it is
/// stopping) instead of sleeping; optionally with its standard input fed by the test.
final class StreamingChild: @unchecked Sendable {
  let process = Process()
  private let out = LineStream()
  private let err = LineStream()
  /// The test's end of the child's standard input (a socket, so a write after the child has gone
  /// fails with EPIPE instead of raising SIGPIPE in the test process); -1 without one.
  private var input: Int32 = -1

  /// Starts the runner with `arguments` (or another program, `executable`); with `feedingInput`,
  /// its standard input is a socket the test writes to with ``send(_:)`` and ends with
  /// ``closeInput()``.
  static func start(
    _ arguments: [String], executable: String = Runner.executable, feedingInput: Bool = false
  ) throws -> StreamingChild {
    let child = StreamingChild()
    child.process.executableURL = URL(fileURLWithPath: executable)
    child.process.arguments = arguments
    child.process.currentDirectoryURL = Runner.package
    child.process.standardOutput = child.out.pipe
    child.process.standardError = child.err.pipe
    var childInput: FileHandle?
    if feedingInput {
      var ends: [Int32] = [-1, -1]
      guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
      }
      child.input = ends[0]
      childInput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
      child.process.standardInput = childInput
    }
    try child.process.run()
    try childInput?.close()  // the child has its own copy
    child.out.startReading()
    child.err.startReading()
    return child
  }

  /// Waits until a line of stdout satisfying `predicate` has arrived (or stdout ended).
  func waitForLine(_ predicate: @escaping @Sendable (String) -> Bool) async {
    await offPool { [out] in out.wait(for: predicate) }
  }

  /// The first line of stdout satisfying `predicate`, once it has arrived (`nil` if stdout ended
  /// without one).
  func line(where predicate: @escaping @Sendable (String) -> Bool) async -> String? {
    await offPool { [out] in
      out.wait(for: predicate)
      return out.lines.first(where: predicate)
    }
  }

  /// Waits until a line of stderr satisfying `predicate` has arrived (or stderr ended).
  func waitForErrorLine(_ predicate: @escaping @Sendable (String) -> Bool) async {
    await offPool { [err] in err.wait(for: predicate) }
  }

  /// Writes `data` to the child's standard input, blocking while its buffer is full (so when this
  /// returns, the child has read all but a buffer's worth); how much was written, and the error
  /// (`EPIPE`, `ECONNRESET`) that stopped it when the child went away first.
  func send(_ data: Data) async -> (sent: Int, error: Int32?) {
    let input = input
    return await offPool { Self.send(data, to: input) }
  }

  private static func send(_ data: Data, to input: Int32) -> (sent: Int, error: Int32?) {
    data.withUnsafeBytes { bytes in
      guard let base = bytes.baseAddress else { return (0, nil) }
      var sent = 0
      while sent < bytes.count {
        let count = Glibc.send(input, base + sent, min(1 << 16, bytes.count - sent), Int32(MSG_NOSIGNAL))
        if count < 0 {
          if errno == EINTR { continue }
          return (sent, errno)
        }
        sent += count
      }
      return (sent, nil)
    }
  }

  /// Ends the child's standard input.
  func closeInput() {
    if input >= 0 { close(input) }
    input = -1
  }

  /// Waits for the child to end by itself, its standard input still open (a writer that neither
  /// writes nor closes), then closes it.
  func finishWithInputOpen() async -> Runner.Result {
    await offPool { self.finishWithInputOpenBlocking() }
  }

  private func finishWithInputOpenBlocking() -> Runner.Result {
    let stdout = out.finish()
    let stderr = err.finish()
    process.waitUntilExit()
    closeInput()
    return Runner.Result(status: process.terminationStatus, stdout: stdout, stderr: stderr)
  }

  func finish() async -> Runner.Result {
    await offPool { self.finishBlocking() }
  }

  private func finishBlocking() -> Runner.Result {
    closeInput()
    return finishWithInputOpenBlocking()
  }

}

/// One output stream of a child, read on its own thread and cut into lines as they arrive.
private final class LineStream: @unchecked Sendable {
  let pipe = Pipe()
  private let read = Protected((lines: [String](), ended: false))
  private let arrived = DispatchSemaphore(value: 0)
  private let done = DispatchSemaphore(value: 0)

  func startReading() {
    Thread { [self] in
      var pending = Data()
      while true {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        pending.append(chunk)
        while let newline = pending.firstIndex(of: 0x0A) {
          let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
          pending.removeSubrange(pending.startIndex...newline)
          read.withLock { $0.lines.append(line) }
          arrived.signal()
        }
      }
      read.withLock { read in
        if !pending.isEmpty { read.lines.append(String(decoding: pending, as: UTF8.self)) }
        read.ended = true
      }
      arrived.signal()
      done.signal()
    }.start()
  }

  func wait(for predicate: (String) -> Bool) {
    while !read.withLock({ $0.lines.contains(where: predicate) || $0.ended }) { arrived.wait() }
  }

  /// The lines read so far.
  var lines: [String] { read.withLock { $0.lines } }

  /// Every line, once the stream has ended.
  func finish() -> String {
    done.wait()
    return read.withLock { $0.lines.joined(separator: "\n") }
  }
}
