"""The engine: bus, hooks, turn state and the iteration loop. Imports nothing above it."""
