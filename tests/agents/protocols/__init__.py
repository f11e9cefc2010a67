"""Wire-protocol plug-ins of the scripted model server (a test stand-in): see scripted_server.py."""
