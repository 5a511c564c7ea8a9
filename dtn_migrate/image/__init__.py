"""Images in a cloud's Glance: metadata descriptors and the image service
client of the migration engine.
"""
