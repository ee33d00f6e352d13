import CFileShim
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Reads local files for the ``Fetcher``: plain paths and `file://` URLs.
///
/// With roots set, the source must lie inside every root, and the file is opened *beneath* the
/// roots: the path is resolved (symlinks and `..`) to decide whether it is inside, and the kernel
/// then opens exactly that resolved path, component by component from a descriptor of the
/// innermost root, refusing any symbolic link met on the way (`openat2(2)` with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or an `openat` walk with `O_NOFOLLOW` where the
/// kernel lacks it). A folder swapped for a symlink between the check and the open therefore
/// fails the read instead of leading outside. Symlinks that stay inside the root keep working,
/// because the check resolves them before the open.
///
/// The size is checked before reading, and the read stops at `maxBytes` even if the file grows
/// meanwhile. Reading runs on the blocking pool.
///
/// ```swift
/// let fetch = Fetcher(root: "/srv/uploads")   // FileTransport serves its file paths
/// ```
package struct FileTransport: FetchTransport {
  public let schemes: Set<String> = ["file"]

  public init() {}

  public func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    guard case .file(let path) = source.location else {
      throw PipelineError(.invalidInput, "\(source) is not a local file", source: source.description)
    }
    return try await context.blocking { try FileTransport.read(path: path, source: source, limits: limits) }
  }

  /// O_NONBLOCK: opening a FIFO or device must not hang a pool thread (it is refused after fstat).
  static let readFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK

  static func read(path: String, source: ImageSource, limits: FetchLimits) throws -> FetchedData {
    let shown = source.description
    let file = try openRegularFile(path, roots: limits.roots, shown: shown, wanted: "an image file")
    var keepOpen = false
    defer { if !keepOpen { close(file.descriptor) } }
    let size = file.size
    if size > limits.maxBytes {
      throw PipelineError(
        .tooLarge, "\(path) is \(size) bytes, over the limit of \(limits.maxBytes) bytes (maxBytes)", source: shown)
    }
    let modified = file.modified
    if size >= Self.streamingThreshold, ImageBytes.openFiles < ImageBytes.maxOpenFiles {
      // Large files stay in the file: the decoder reads them a little at a time (a 10000×10000
      // JPEG is ~19 MB that memory never needs to hold). The open descriptor keeps reading the
      // file that was checked, whatever happens to its path; at most `size` bytes are read.
      // Past `ImageBytes.maxOpenFiles` such files in flight, files are read into memory.
      keepOpen = true
      let bytes = ImageBytes(openFile: file.descriptor, count: size)
      return FetchedData(
        source: source, bytes: bytes, contentType: ImageFormat.sniff(bytes.prefix(64))?.mimeType, lastModified: modified,
        metadata: ["path": file.resolved, "size": String(size)])
    }
    let bytes = try readWhole(file, limit: limits.maxBytes, path: path, shown: shown, limitName: "maxBytes")
    return FetchedData(
      source: source, bytes: bytes, contentType: ImageFormat.sniff(bytes.prefix(64))?.mimeType, lastModified: modified,
      metadata: ["path": file.resolved, "size": String(bytes.count)])
  }

  /// A local file open for reading, checked to be a regular file.
  package struct OpenedFile {
    package var descriptor: Int32
    /// The path as the file system resolves it.
    package var resolved: String
    /// The size `fstat(2)` reported when the file was opened.
    package var size: Int
    package var modified: Date
  }

  /// Opens `path` for reading (beneath every root when `roots` is not empty, see
  /// ``openConfined(_:roots:shown:)``) and checks that it is a regular file: a directory, FIFO or
  /// device is refused with `invalidInput` saying that `wanted` (`"an image file"`) is expected.
  /// The caller closes the descriptor.
  package static func openRegularFile(_ path: String, roots: [String], shown: String, wanted: String) throws -> OpenedFile {
    guard !path.isEmpty else { throw PipelineError(.invalidInput, "the source path is empty", source: shown) }
    let descriptor: Int32
    let resolved: String
    if roots.isEmpty {
      // No confinement: any path the process can read, symlinks followed. A path that is not a
      // regular file is refused before it is opened: opening some devices does something
      // (a watchdog starts counting). The check after the open stays: the path may change between.
      var before = stat()
      if stat(path, &before) == 0, before.st_mode & S_IFMT != S_IFREG {
        throw notRegular(path, mode: before.st_mode, wanted: wanted, shown: shown)
      }
      descriptor = open(path, readFlags)
      guard descriptor >= 0 else { throw openError(path, shown: shown) }
      resolved = realPath("/proc/self/fd/\(descriptor)") ?? path
    } else {
      (descriptor, resolved) = try openConfined(path, roots: roots, shown: shown)
    }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else {
      let cause = posixCause()
      close(descriptor)
      throw PipelineError(.fetchFailed, "cannot inspect \(path)", source: shown, cause: cause)
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      close(descriptor)
      throw notRegular(path, mode: status.st_mode, wanted: wanted, shown: shown)
    }
    // A file that says it is empty stays non-blocking: procfs files say so, and some block a
    // read until the kernel has something to say (/proc/kmsg); regular files never block anyway.
    if status.st_size > 0 { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK) }
    let modified = Date(timeIntervalSince1970: TimeInterval(status.st_mtim.tv_sec))
    return OpenedFile(descriptor: descriptor, resolved: resolved, size: Int(status.st_size), modified: modified)
  }

  /// The error for a path that is a directory, FIFO, device or socket where `wanted` was expected.
  static func notRegular(_ path: String, mode: mode_t, wanted: String, shown: String) -> PipelineError {
    let what = mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
    return PipelineError(.invalidInput, "\(path) is \(what); give \(wanted)", source: shown)
  }

  /// Reads the whole of an opened file into memory (a buffer of the shared ``BufferRecycler``,
  /// given back when the bytes are released), at most `limit` bytes: a file that grew past `limit`
  /// while it was read fails with `tooLarge`, naming the option `limitName` that sets the limit.
  package static func readWhole(
    _ file: OpenedFile, limit: Int, path: String, shown: String, limitName: String
  ) throws -> ImageBytes {
    // One byte more than allowed, to tell a file that grew past the limit while it was read.
    let capacity = min(max(file.size, 0), limit, Int.max - 1) + 1
    let buffer = BufferRecycler.shared.allocate(atLeast: capacity)
    var filled = 0
    while filled < capacity, let start = buffer.baseAddress {
      let count = Glibc.read(file.descriptor, start + filled, capacity - filled)
      if count < 0 {
        if errno == EINTR { continue }
        let cause = posixCause()
        BufferRecycler.shared.recycle(buffer)
        throw PipelineError(.fetchFailed, "reading \(path) failed: \(cause.text)", source: shown, cause: cause)
      }
      if count == 0 { break }
      filled += count
    }
    if filled > limit {
      BufferRecycler.shared.recycle(buffer)
      throw PipelineError(
        .tooLarge, "\(path) grew past the limit of \(limit) bytes (\(limitName)) while it was read", source: shown)
    }
    return ImageBytes(recycling: buffer, count: filled)
  }

  /// The whole of a small file a pipeline names (a CA bundle, a watermark), read when the pipeline
  /// loads: opened as ``openRegularFile(_:roots:shown:wanted:)`` does, refused with `tooLarge`
  /// (the error `tooLarge` makes from its size) when over `limit` bytes, and read whole.
  package static func readSmallFile(
    _ path: String, roots: [String], wanted: String, limit: Int, limitName: String,
    tooLarge: (_ size: Int) -> PipelineError
  ) throws -> [UInt8] {
    let file = try openRegularFile(path, roots: roots, shown: path, wanted: wanted)
    defer { close(file.descriptor) }
    guard file.size <= limit else { throw tooLarge(file.size) }
    return try readWhole(file, limit: limit, path: path, shown: path, limitName: limitName).withUnsafeBytes { Array($0) }
  }

  /// Opens `path` for reading beneath every root, returning the descriptor and the resolved path.
  ///
  /// The roots and the path are resolved with `realpath(3)` to decide whether the path is inside
  /// them (a path that escapes, by `..` or through a symlink, is refused here with the resolved
  /// path in the message). Then the outermost root is opened, each inner root beneath the one
  /// around it, and the file beneath the innermost, each by the resolved relative path with no
  /// symlink allowed: whatever changes on disk after the check, the file opened is inside them.
  static func openConfined(_ path: String, roots: [String], shown: String) throws -> (Int32, String) {
    guard let resolved = realPath(path) else {
      let code: PipelineError.Code = errno == EACCES ? .accessDenied : .notFound
      let reason = code == .notFound ? "does not exist" : "cannot be reached (permission denied)"
      throw PipelineError(code, "\(path) \(reason)", source: shown, cause: posixCause())
    }
    var resolvedRoots: [String] = []
    for root in roots {
      guard let resolvedRoot = realPath(root) else {
        throw PipelineError(.accessDenied, "the allowed root \(root) does not exist", source: shown)
      }
      guard relative(resolved, beneath: resolvedRoot) != nil else {
        throw PipelineError(
          .accessDenied,
          "\(path) resolves to \(resolved), outside the allowed root \(resolvedRoot): only files inside it may be read",
          source: shown)
      }
      resolvedRoots.append(resolvedRoot)
    }
    // Every root is a prefix of the same resolved path, so they nest: shortest is outermost.
    let chain = Set(resolvedRoots).sorted { $0.utf8.count < $1.utf8.count }
    guard let outermost = chain.first else { throw PipelineError(.accessDenied, "no allowed root", source: shown) }
    var directory = open(outermost, O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH)
    guard directory >= 0 else {
      throw PipelineError(
        .accessDenied, "the allowed root \(outermost) cannot be opened: \(String(cString: strerror(errno)))",
        source: shown, cause: posixCause())
    }
    defer { close(directory) }
    var outer = outermost
    for inner in chain.dropFirst() {
      guard let step = relative(inner, beneath: outer) else {
        throw PipelineError(.accessDenied, "the allowed root \(inner) is not inside \(outer)", source: shown)
      }
      let next = openBeneath(directory, step, flags: O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH)
      guard next >= 0 else {
        throw PipelineError(
          .accessDenied,
          "the allowed root \(inner) cannot be opened inside \(outer) (\(String(cString: strerror(errno)))): "
            + "a folder on its path may have been replaced by a symbolic link",
          source: shown, cause: posixCause())
      }
      close(directory)
      directory = next
      outer = inner
    }
    guard let step = relative(resolved, beneath: outer) else {
      throw PipelineError(
        .accessDenied, "\(path) resolves to \(resolved), outside the allowed root \(outer)", source: shown)
    }
    let descriptor = openBeneath(directory, step, flags: readFlags)
    guard descriptor >= 0 else {
      switch errno {
      case ELOOP, EXDEV:
        throw PipelineError(
          .accessDenied,
          "\(path) was not read: a folder on its path, or the file itself, became a symbolic link after it was "
            + "checked against the allowed root \(outer) (only the checked path is opened)",
          source: shown, cause: posixCause())
      case ENOTDIR:
        throw PipelineError(
          .notFound, "\(path) does not exist (a folder on its path is no longer a folder)", source: shown,
          cause: posixCause())
      default:
        throw openError(path, shown: shown)
      }
    }
    return (descriptor, resolved)
  }

  /// `path` relative to `root` when it lies strictly inside it (both resolved), else `nil`.
  static func relative(_ path: String, beneath root: String) -> String? {
    let prefix = root.hasSuffix("/") ? root : root + "/"
    guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count else { return nil }
    return String(path.dropFirst(prefix.count))
  }

  /// Set once `openat2(2)` has answered ENOSYS: the walk is used from then on.
  private static let openat2Missing = Atomic<Bool>(false)

  /// Opens the relative `path` beneath `directory` with `flags`, following no symbolic link and
  /// never leaving `directory`: `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or
  /// (kernels before 5.6, sandboxes that hide the call) a walk of `openat` calls with
  /// `O_NOFOLLOW`, one component at a time. Returns -1 with `errno` set on failure: `ELOOP` for a
  /// symlink, `EXDEV` for a `..` that would leave `directory`.
  package static func openBeneath(_ directory: Int32, _ path: String, flags: Int32) -> Int32 {
    if !openat2Missing.load(ordering: .relaxed) {
      let resolve = UInt64(DR_RESOLVE_BENEATH | DR_RESOLVE_NO_SYMLINKS | DR_RESOLVE_NO_MAGICLINKS)
      var attempts = 0
      while true {
        let descriptor = dr_openat2(directory, path, UInt64(UInt32(bitPattern: flags)), resolve)
        if descriptor >= 0 { return descriptor }
        // EAGAIN: the kernel saw a concurrent rename and could not prove the walk stayed beneath.
        if errno == EAGAIN || errno == EINTR, attempts < 8 {
          attempts += 1
          continue
        }
        if errno == ENOSYS {
          openat2Missing.store(true, ordering: .relaxed)
          break
        }
        // EPERM can be a seccomp filter refusing openat2 itself; the walk is as strict.
        if errno != EPERM { return -1 }
        break
      }
    }
    return walkBeneath(directory, path, flags: flags)
  }

  /// The fallback of ``openBeneath(_:_:flags:)``: each folder is opened with
  /// `O_PATH | O_NOFOLLOW` from the previous one and must be a folder (a symlink is refused with
  /// `ELOOP`), and the last component is opened with `O_NOFOLLOW`.
  static func walkBeneath(_ directory: Int32, _ path: String, flags: Int32) -> Int32 {
    let components = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
    guard let last = components.last else {
      errno = ENOENT
      return -1
    }
    if components.contains("..") {
      errno = EXDEV  // resolved paths have none; refusing keeps the walk beneath `directory`
      return -1
    }
    var current = directory
    defer { if current != directory { close(current) } }
    for component in components.dropLast() {
      let next = openat(current, String(component), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | DR_O_PATH)
      guard next >= 0 else { return -1 }
      var status = stat()
      guard fstat(next, &status) == 0 else {
        let saved = errno
        close(next)
        errno = saved
        return -1
      }
      guard status.st_mode & S_IFMT == S_IFDIR else {
        close(next)
        errno = status.st_mode & S_IFMT == S_IFLNK ? ELOOP : ENOTDIR
        return -1
      }
      if current != directory { close(current) }
      current = next
    }
    return openat(current, String(last), flags | O_NOFOLLOW)
  }

  /// The typed error for a failed `open` of `path` (errno set).
  static func openError(_ path: String, shown: String) -> PipelineError {
    let reason = String(cString: strerror(errno))
    switch errno {
    case ENOENT:
      return PipelineError(.notFound, "\(path) does not exist", source: shown, cause: posixCause())
    case EACCES, EPERM:
      return PipelineError(
        .accessDenied, "\(path) cannot be read (permission denied)", source: shown, cause: posixCause())
    default:
      return PipelineError(.fetchFailed, "cannot open \(path): \(reason)", source: shown, cause: posixCause())
    }
  }

  /// Files at least this large (1 MiB) are read by the decoder from the file, not into memory.
  public static let streamingThreshold = 1 << 20

  static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  static func posixCause() -> LibraryMessage {
    LibraryMessage(library: "posix", text: String(cString: strerror(errno)))
  }
}
