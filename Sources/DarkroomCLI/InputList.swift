import Darkroom
import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Reads an input list (`--input-list FILE`, `-` for standard input): one URL or path per line,
/// blank lines and `#` comments skipped.
///
/// The list is read as it streams in, 64 KiB at a time, and only the line being read is held: a
/// line longer than ``maxLineBytes`` is refused as soon as it passes the limit, naming its line
/// number, so a list of one 60 MB line costs no more memory than a list of short ones. Only a
/// regular file (or standard input) is read, and at most ``maxBytes`` of it: a device or a FIFO
/// is refused instead of read for ever.
///
/// Lines end at `"\n"` only (a `"\r"` before it is dropped): a file name may hold U+2028, U+0085,
/// a vertical tab or a form feed, and splitting there would make one listed name two inputs. A
/// NUL cannot be in a path: such a line is refused, not cut short.
enum InputList {
  /// The largest input list read (64 MiB: about a million URLs).
  static let maxBytes = 64 << 20

  /// The longest line: 64 KiB, far more than a path can be (`PATH_MAX` is 4,096 bytes) and than
  /// the URLs servers accept (8 to 64 KiB), enough for a `data:` URL of a small image.
  static let maxLineBytes = 64 << 10

  /// Why a list cannot be read.
  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  /// The inputs listed in the file at `path` (`-`: standard input). Reading standard input stops
  /// when `wakeup` becomes readable (a stop signal): the whole lines read so far are returned.
  static func read(_ path: String, wakeup: Int32? = nil) throws(Failure) -> [String] {
    var splitter = LineSplitter(maxLineBytes: maxLineBytes)
    do {
      if path == "-" {
        let interrupted = try BoundedFileReader.readChunks(descriptor: 0, limit: maxBytes, interrupt: wakeup) {
          splitter.take($0)
        }
        if interrupted { return splitter.entries }  // never half a name
      } else {
        let descriptor = try BoundedFileReader.openRegularFile(path)
        defer { close(descriptor) }
        try BoundedFileReader.readChunks(descriptor: descriptor, limit: maxBytes) { splitter.take($0) }
      }
    } catch {
      switch error {
      case .tooLarge: throw Failure(description: "it is over \(maxBytes >> 20) MiB; split it into several lists")
      case .notRegular: throw Failure(description: "it is not a regular file (give a file, or - for standard input)")
      case .system: throw Failure(description: error.description)
      }
    }
    return try splitter.finish()
  }

  /// ``read(_:wakeup:)`` on a thread of its own: standard input may block for as long as its
  /// writer waits, which must not hold a thread of the cooperative pool.
  static func readOffPool(_ path: String, wakeup: Int32?) async throws(Failure) -> [String] {
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[String], Failure>, Never>) in
      Thread.detachNewThread {
        continuation.resume(returning: Result { () throws(Failure) -> [String] in try read(path, wakeup: wakeup) })
      }
    }
    return try result.get()
  }

  /// Cuts streamed bytes into the list's entries, holding only the line being read.
  struct LineSplitter {
    let maxLineBytes: Int
    private(set) var entries: [String] = []
    private var line: [UInt8] = []
    private var lineNumber = 1
    private var problem: Failure?

    init(maxLineBytes: Int) { self.maxLineBytes = maxLineBytes }

    /// Takes the next bytes; `false` once the list is refused (the rest need not be read).
    mutating func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
      var rest = bytes
      while let start = rest.baseAddress, !rest.isEmpty, problem == nil {
        let end = memchr(start, Int32(UInt8(ascii: "\n")), rest.count).map { start.distance(to: UnsafeRawPointer($0)) }
        let piece = UnsafeRawBufferPointer(rebasing: rest[..<(end ?? rest.endIndex)])
        guard line.count + piece.count <= maxLineBytes + 1 else {  // + 1: the "\r" of a CRLF
          problem = tooLong()
          break
        }
        line.append(contentsOf: piece)
        guard let end else { break }
        endLine()
        rest = UnsafeRawBufferPointer(rebasing: rest[(end + 1)...])
      }
      return problem == nil
    }

    /// The entries, once every byte was taken.
    mutating func finish() throws(Failure) -> [String] {
      if let problem { throw problem }
      if !line.isEmpty { endLine() }
      if let problem { throw problem }
      return entries
    }

    private mutating func endLine() {
      defer {
        line.removeAll(keepingCapacity: true)
        lineNumber += 1
      }
      if line.last == UInt8(ascii: "\r") { line.removeLast() }
      guard line.count <= maxLineBytes else {
        problem = tooLong()
        return
      }
      guard !line.contains(0) else {
        problem = Failure(description: "line \(lineNumber) holds a NUL byte, which no path or URL can hold")
        return
      }
      // A byte-order mark opening the list (as some editors save) is not part of the first name.
      if lineNumber == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
      guard let text = String(validating: line, as: UTF8.self) else {
        // Decoded with repairs, the name could be another file's (U+FFFD in place of the bytes).
        problem = Failure(description: "line \(lineNumber) is not valid UTF-8; list such files by a folder, or rename them")
        return
      }
      // Spaces and tabs off both ends, on the bytes (Foundation's trimming bridged every line
      // to NSString: 1.2 ms of a 200-line list, before the first transfer).
      let entry = HTTPWhitespace.trimmed(text)
      if !entry.isEmpty && !entry.hasPrefix("#") { entries.append(entry) }
    }

    private func tooLong() -> Failure {
      Failure(
        description: "line \(lineNumber) is longer than \(maxLineBytes) bytes, longer than any path or URL of a list "
          + "(give the image of a large data: URL as a file)")
    }
  }
}
