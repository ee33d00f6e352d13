import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// An immutable block of bytes with a stable address, shared by reference.
///
/// Image libraries such as libvips read from the caller's memory without copying, so the memory
/// must stay put and alive for as long as any image made from it exists. `ImageBytes` owns its
/// allocation explicitly; holders (a decoded image, say) keep a reference to it, and the memory is
/// freed when the last reference goes.
///
/// The bytes of a large local file can stay in the file (``init(openFile:count:)``): a decoder
/// then reads the file itself through ``streamingDescriptor``, a few kilobytes at a time, and
/// memory never holds the whole compressed image. The first call that needs
/// them all (``withUnsafeBytes(_:)``, ``baseAddress``, ``data``, equality) reads them into
/// memory once; ``prefix(_:)`` and ``withUnsafeHead(_:_:)`` read only the start.
///
/// ```swift
/// let bytes = ImageBytes(Data([0xFF, 0xD8, 0xFF]))
/// bytes.withUnsafeBytes { print($0.count) }   // 3
/// ```
public final class ImageBytes: Sendable, Hashable, CustomStringConvertible {
  // `memory` is written at most once (in init, or when a file is first read), under its lock;
  // `descriptor` and `declaredCount` never change. That makes sharing between threads safe.
  private let memory: Protected<UnsafeMutableRawBufferPointer?>
  private let descriptor: Int32?
  private let declaredCount: Int
  /// Where the memory goes back, with its whole capacity, when the last reference goes.
  private let returnedTo: (recycler: BufferRecycler, capacity: Int)?

  /// The number of bytes (for a file: its size when it was opened, or what could be read of it).
  public var count: Int { memory.withLock { $0?.count ?? declaredCount } }

  /// Takes ownership of memory allocated with `UnsafeMutableRawBufferPointer.allocate`.
  public init(adopting buffer: UnsafeMutableRawBufferPointer) {
    memory = Protected(buffer)
    descriptor = nil
    declaredCount = buffer.count
    returnedTo = nil
    head = []
  }

  /// Takes ownership of the first `count` bytes of a buffer from `recycler`'s
  /// ``BufferRecycler/allocate(atLeast:)``; the whole buffer goes back to it when the last
  /// reference goes.
  package init(recycling buffer: UnsafeMutableRawBufferPointer, count: Int, to recycler: BufferRecycler = .shared) {
    let count = min(max(count, 0), buffer.count)
    memory = Protected(UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: count))
    descriptor = nil
    declaredCount = count
    returnedTo = (recycler, buffer.count)
    head = []
  }

  /// Takes ownership of an open regular file of `count` bytes, read lazily; the descriptor is
  /// closed when the last reference goes. Bytes past `count` (a file that grew) are never read.
  public init(openFile descriptor: Int32, count: Int) {
    memory = Protected(nil)
    self.descriptor = descriptor
    declaredCount = count
    returnedTo = nil
    head = []
    Self.openFileCount.add(1, ordering: .relaxed)
  }

  /// Takes ownership of an unnamed file (`O_TMPFILE`, open for reading) holding a fetched body of
  /// `count` bytes written as it arrived: read lazily like ``init(openFile:count:)``, and linked
  /// into place by the first ``AtomicFile`` write that saves it (the file becomes that output;
  /// later writes of the same bytes copy it). `head`, the body's first bytes as they arrived
  /// (up to ``keptHeadBytes``), answers ``withUnsafeHead(_:_:)`` and ``prefix(_:)`` without a read
  /// of the file: sniffing a fetched image's format makes no system call.
  package init(spooledFile descriptor: Int32, count: Int, head: [UInt8] = []) {
    memory = Protected(nil)
    self.descriptor = descriptor
    declaredCount = count
    returnedTo = nil
    self.head = Array(head.prefix(max(0, count)))
    Self.openFileCount.add(1, ordering: .relaxed)
    spool.store(Self.linkableSpool, ordering: .releasing)
  }

  /// The most bytes of a spooled body's start kept in memory: as many as a decoder sniffs.
  package static let keptHeadBytes = 512

  /// The first bytes of a file's contents, kept in memory (empty when none were given).
  private let head: [UInt8]

  /// 0 for bytes that are not a spooled body; ``linkableSpool`` for one no write has linked in
  /// yet, ``linkedSpool`` after.
  private let spool = Atomic<UInt8>(0)
  private static let linkableSpool: UInt8 = 1
  private static let linkedSpool: UInt8 = 2

  /// The unnamed file of a spooled body (``init(spooledFile:count:)``), for the one write that
  /// links it into place; nil for any other bytes, and for every call after the first.
  package func takeSpooledFile() -> Int32? {
    guard let descriptor,
      spool.compareExchange(expected: Self.linkableSpool, desired: Self.linkedSpool, ordering: .acquiringAndReleasing)
        .exchanged
    else { return nil }
    return descriptor
  }

  private static let openFileCount = Atomic<Int>(0)

  /// How many `ImageBytes` hold an open file right now. `FileTransport` reads files into memory
  /// instead once ``maxOpenFiles`` do, so thousands of queued loads never exhaust descriptors.
  public static var openFiles: Int { openFileCount.load(ordering: .relaxed) }

  /// The most file-backed `ImageBytes` the file transport keeps open at once (64).
  public static let maxOpenFiles = 64

  /// Copies bytes from any collection of bytes.
  public convenience init(_ bytes: some Collection<UInt8>) {
    let count = bytes.count
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
    var offset = 0
    let contiguous = bytes.withContiguousStorageIfAvailable { source -> Int in
      buffer.copyMemory(from: UnsafeRawBufferPointer(source))
      return source.count
    }
    if let contiguous {
      offset = contiguous
    } else {
      for byte in bytes.prefix(count) {
        buffer[offset] = byte
        offset += 1
      }
    }
    self.init(adopting: UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: offset))
  }

  /// These bytes in memory of their own size when they sit in a recycled buffer more than an
  /// eighth larger than they are; otherwise `self`. For a holder that keeps them for long (a
  /// memory cache): a recycled buffer's unused tail may be resident (it held larger bytes before),
  /// and would be kept with them.
  package func compacted() -> ImageBytes {
    guard let returnedTo, returnedTo.capacity - count > count / 8 else { return self }
    return withUnsafeBytes { ImageBytes($0) }
  }

  deinit {
    let held = memory.withLock { $0 }
    if let returnedTo, let start = held?.baseAddress {
      returnedTo.recycler.recycle(UnsafeMutableRawBufferPointer(start: start, count: returnedTo.capacity))
    } else {
      held?.deallocate()
    }
    if let descriptor {
      close(descriptor)
      Self.openFileCount.subtract(1, ordering: .relaxed)
      if spool.load(ordering: .relaxed) != 0 { AtomicFile.spoolClosed() }
    }
  }

  /// The open file holding the bytes, while they are still only in the file; `nil` for bytes in
  /// memory. A decoder reads the first ``count`` bytes with `pread(2)` (its own offset, so
  /// concurrent readers do not disturb one another, and a renamed or replaced path does not
  /// matter). Keep this object alive while the descriptor is in use, and do not close it.
  ///
  /// Never let a library memory-map this file: another process can truncate it at any time, and
  /// touching a mapped page past the new end raises SIGBUS, which kills the whole process.
  /// Darkroom's decoder hands libvips a custom source reading through the descriptor (no path, no
  /// mappable descriptor), and only for formats whose loaders read in pieces.
  ///
  /// ```swift
  /// if let descriptor = bytes.streamingDescriptor {
  ///   var head = [UInt8](repeating: 0, count: 4)
  ///   _ = pread(descriptor, &head, 4, 0)
  /// }
  /// ```
  public var streamingDescriptor: Int32? {
    memory.withLock { $0 == nil ? descriptor : nil }
  }

  /// A path naming the same open file (`/proc/self/fd/N`), while the bytes are still only in the
  /// file; `nil` for bytes in memory.
  ///
  /// Deprecated: a library given a path may memory-map the file (libvips' WebP and GIF loaders
  /// do), and a file truncated by another process then kills the process with SIGBUS. Use
  /// ``streamingDescriptor`` and read with `pread(2)`.
  ///
  /// ```swift
  /// let streamed = bytes.streamingDescriptor != nil   // instead of streamingPath != nil
  /// ```
  @available(*, deprecated, message: "a path lets a library map the file (SIGBUS on truncation); use streamingDescriptor")
  public var streamingPath: String? {
    streamingDescriptor.map { "/proc/self/fd/\($0)" }
  }

  /// The bytes in memory, reading the file the first time.
  private var storage: UnsafeMutableRawBufferPointer {
    memory.withLock { memory in
      if let memory { return memory }
      let read = Self.read(descriptor ?? -1, upTo: declaredCount)
      memory = read
      return read
    }
  }

  /// Calls `body` with the bytes; the pointer is valid for as long as this object is alive.
  public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    try body(UnsafeRawBufferPointer(storage))
  }

  /// Calls `body` with at most the first `maxCount` bytes, without reading the rest of a file.
  public func withUnsafeHead<R>(_ maxCount: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    let inMemory = memory.withLock { $0 ?? (descriptor == nil ? UnsafeMutableRawBufferPointer(start: nil, count: 0) : nil) }
    if let inMemory {
      return try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(inMemory).prefix(max(0, maxCount))))
    }
    if !self.head.isEmpty, maxCount <= self.head.count || self.head.count == declaredCount {
      return try self.head.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0.prefix(max(0, maxCount)))) }
    }
    let head = Self.read(descriptor ?? -1, upTo: max(0, min(maxCount, declaredCount)))
    defer { head.deallocate() }
    return try body(UnsafeRawBufferPointer(head))
  }

  /// The start address, valid for as long as this object is alive (for handing to C libraries
  /// that keep the pointer; keep a reference to `self` next to what they return).
  public var baseAddress: UnsafeRawPointer? { UnsafeRawPointer(storage.baseAddress) }

  /// A copy of the bytes as `Data`.
  public var data: Data { Data(storage) }

  /// Up to `count` bytes from `offset` (fewer at the end, none outside), without reading the rest
  /// of a file: for walking a header that may lie beyond the first pages.
  public func bytes(at offset: Int, count: Int) -> [UInt8] {
    let total = self.count
    guard offset >= 0, offset < total, count > 0 else { return [] }
    let length = min(count, total - offset)
    let inMemory = memory.value
    if let inMemory { return Array(UnsafeRawBufferPointer(inMemory)[offset..<offset + length]) }
    guard let descriptor else { return [] }
    var out = [UInt8](repeating: 0, count: length)
    let read = out.withUnsafeMutableBytes { DescriptorIO.readAll(descriptor, into: $0, at: offset) }
    return Array(out.prefix(max(0, read)))
  }

  /// The first `n` bytes (fewer when the block is shorter), for sniffing formats.
  public func prefix(_ n: Int) -> [UInt8] { withUnsafeHead(n) { Array($0) } }

  /// Reads up to `count` bytes from the start of `descriptor` (fewer if the file is shorter or a
  /// read fails: a decoder then reports the image as truncated).
  private static func read(_ descriptor: Int32, upTo count: Int) -> UnsafeMutableRawBufferPointer {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
    let filled = max(0, DescriptorIO.readAll(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: 0))
    return UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: filled)
  }

  public static func == (lhs: ImageBytes, rhs: ImageBytes) -> Bool {
    guard lhs !== rhs else { return true }
    let left = lhs.storage
    let right = rhs.storage
    guard left.count == right.count else { return false }
    guard let leftBase = left.baseAddress, let rightBase = right.baseAddress else { return true }
    return memcmp(leftBase, rightBase, left.count) == 0
  }

  /// Hashes the size and the first and last 64 bytes (equality compares every byte).
  public func hash(into hasher: inout Hasher) {
    let bytes = storage
    hasher.combine(bytes.count)
    hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.prefix(64)))
    hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.suffix(64)))
  }

  public var description: String { "\(count) bytes" }
}
