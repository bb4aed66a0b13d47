"""What Horovod keeps in horovod.common that scripts import: its exceptions."""
