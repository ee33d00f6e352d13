import DarkroomCore
import Foundation
import Testing

@Suite("Live object registry")
struct LiveObjectRegistryTests {
  final class Thing: Sendable {
    let id: Int
    init(_ id: Int) { self.id = id }
  }

  final class Count: Sendable {
    private let value = Protected(0)
    func next() -> Int {
      value.withLock {
        $0 += 1
        return $0
      }
    }
    var current: Int { value.value }
  }

  @Test("100 concurrent requests for one key create one object and all get it")
  func sharesUnderConcurrency() async throws {
    let registry = LiveObjectRegistry<String, Thing>()
    let creations = Count()
    let things = try await withThrowingTaskGroup(of: Thing.self) { group in
      for _ in 0..<100 {
        group.addTask {
          try await registry.object(for: "a") {
            await Task.yield()
            return Thing(creations.next())
          }
        }
      }
      return try await group.reduce(into: [Thing]()) { $0.append($1) }
    }
    #expect(creations.current == 1)
    #expect(things.allSatisfy { $0 === things[0] })
    #expect(registry.liveCount == 1)
  }

  @Test("it holds nothing alive: once released, the next request creates anew; keys do not mix")
  func weak() async throws {
    let registry = LiveObjectRegistry<String, Thing>()
    let creations = Count()
    var first: Thing? = try await registry.object(for: "a") { Thing(creations.next()) }
    let other = try await registry.object(for: "b") { Thing(creations.next()) }
    #expect(first !== other)
    #expect(try await registry.object(for: "a") { Thing(creations.next()) } === first)
    first = nil
    #expect(registry.existing(for: "a") == nil)
    let again = try await registry.object(for: "a") { Thing(creations.next()) }
    #expect(again.id == 3 && registry.liveCount == 2)
  }

  @Test("a failed creation is not remembered")
  func failureRetried() async throws {
    struct Boom: Error {}
    let registry = LiveObjectRegistry<String, Thing>()
    await #expect(throws: Boom.self) { try await registry.object(for: "a") { throw Boom() } }
    let thing = try await registry.object(for: "a") { Thing(7) }
    #expect(thing.id == 7)
  }
}
