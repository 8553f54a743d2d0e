import PushRelay
import ArgumentParser
print("x")
